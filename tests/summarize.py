#!/usr/bin/python3
"""Sum test results over meson test logs: TAP suites count their subtests,
other tests count once. A test meson reports as SKIP (or a TAP line
"ok N # SKIP") is counted as skipped, never as passed; a suite registered
without its tools (tests/e2e/meson.build: exit 77) is listed with the
reason it printed. Prints
"N passed, N failed" as the last line, preceded by "N skipped" when any
test was skipped, and by what failed (the "not ok" lines with their first
diagnostics, or the end of a crashed test's output)."""
import json
import re
import sys

passed = failed = skipped = 0


def explain(t, out):
    """What failed, in the lines CI keeps: each "not ok" line with the
    first diagnostics under it and the test's "# seed" lines; for a test
    that died without a "not ok", the end of its output and errors."""
    lines = out.splitlines()
    shown = 0
    for i, line in enumerate(lines):
        if line.startswith("# seed"):
            print("    " + line)
        if line.startswith("not ok") and shown < 8:
            shown += 1
            print("    " + line[:300])
            for diag in lines[i + 1:i + 6]:
                if not diag.startswith("#"):
                    break
                print("      " + diag[:300])
    if not shown:
        tail = (out + "\n" + (t.get("stderr") or "")).strip().splitlines()
        for line in tail[-12:]:
            print("    | " + line[:300])

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
        skips = len(re.findall(r"^ok \d+[^\n]*#\s*SKIP", out, re.M | re.I))
        oks = len(re.findall(r"^ok \d+", out, re.M)) - skips
        bad = len(re.findall(r"^not ok \d+", out, re.M))
        if t.get("result") == "SKIP" and oks + bad == 0:
            skipped += 1
            # a suite registered without its tools says what is missing
            why = next((ln.strip() for ln in out.splitlines() if ln.strip()),
                       "")
            print(f"SKIPPED: {t.get('name')} in {path}"
                  + (f" ({why[:200]})" if why else ""))
            continue
        ok = t.get("result") in ("OK", "EXPECTEDFAIL")
        skipped += skips
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
            explain(t, out)
if skipped:
    print(f"{skipped} skipped (counted neither as passed nor as failed)")
print(f"{passed} passed, {failed} failed")
