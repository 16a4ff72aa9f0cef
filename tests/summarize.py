#!/usr/bin/python3
"""Sum test results over meson test logs: TAP suites count their subtests,
other tests count once. Prints 'N passed, N failed' as the last line."""
import json
import re
import sys

passed = failed = 0
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        print(f"{path}: missing log (counted as one failure)")
        failed += 1
        continue
    for line in lines:
        if not line.strip():
            continue
        t = json.loads(line)
        out = t.get("stdout") or ""
        oks = len(re.findall(r"^ok \d+", out, re.M))
        bad = len(re.findall(r"^not ok \d+", out, re.M))
        ok = t.get("result") in ("OK", "EXPECTEDFAIL", "SKIP")
        if oks + bad:
            passed += oks
            failed += bad
            if not ok and bad == 0:
                failed += 1  # crashed or timed out after its last TAP line
        else:
            if ok:
                passed += 1
            else:
                failed += 1
        if not ok:
            print(f"FAILED: {t.get('name')} in {path}")
print(f"{passed} passed, {failed} failed")
