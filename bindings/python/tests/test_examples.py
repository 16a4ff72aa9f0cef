"""examples/python/tour.py runs against the built package."""
from __future__ import annotations

import subprocess
import sys

from conftest import SOURCE_ROOT
from test_cli import _env


def test_tour_runs():
    tour = SOURCE_ROOT / "examples" / "python" / "tour.py"
    proc = subprocess.run([sys.executable, str(tour)], capture_output=True,
                          text=True, check=False, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "notify raised the loader's exception" in proc.stdout
    assert "SY_EREGEX at routes[0].predicates[0].args.regexp" in proc.stdout
