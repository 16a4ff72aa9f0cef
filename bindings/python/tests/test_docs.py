"""The ```python blocks of docs/python.md run, in order, in one namespace
(as a reader pasting them one after the other would), in a fresh
interpreter. A block whose info string has the word "fragment" is skipped
(the convention of tests/docs/check_snippets.py for C). The printed
results the page promises in its comments are checked too."""
from __future__ import annotations

import re
import subprocess
import sys

from conftest import SOURCE_ROOT
from test_cli import _env

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)


def python_blocks(text: str) -> list:
    blocks = []
    for m in FENCE.finditer(text):
        info = m.group(1).split()
        if info and info[0] == "python" and "fragment" not in info:
            line = text.count("\n", 0, m.start()) + 2
            blocks.append((line, m.group(2)))
    return blocks


def test_python_md_blocks_run():
    doc = SOURCE_ROOT / "docs" / "python.md"
    blocks = python_blocks(doc.read_text())
    assert len(blocks) >= 6
    # each block is compiled with its own line numbers in the .md file
    runner = ["import sys", "ns = {'__name__': '__main__'}"]
    for line, code in blocks:
        padded = "\n" * (line - 1) + code
        runner.append(f"exec(compile({padded!r}, {str(doc)!r}, 'exec'), ns)")
    proc = subprocess.run([sys.executable, "-c", "\n".join(runner)],
                          capture_output=True, text=True, check=False,
                          env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for promised in ("['public', 'orders']", "(200, 'o2')",
                     "(405, 'GET, POST')", "(404, '')", "(200, 'gw')",
                     "http://a:8080 0 1",
                     "closing the pool of http://a:8080",
                     "closing the pool of http://a:9090",
                     "main 3 1 1 SY_ESYNTAX", "applied anyway: ('a',)",
                     "(302, 'https://docs.example.com')", "(404, '')",
                     "Host: 10.0.0.1:8080"):
        assert promised in out, (promised, out)
