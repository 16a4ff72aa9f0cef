#!/usr/bin/env python3
"""test_structure.py - TAP checks of the structure docs/architecture.md
promises:
- layers ("Modules"): every #include "x.h" and every call of a function
  defined in another lib/*.c file goes to the same or a lower layer, so the
  modules have no loop. A new lib/ file must be given a layer here.
- names ("Names"): the shared library exports only calls declared with
  SY_API in include/switchyard.h; nothing internal leaks out.

Usage: test_structure.py SOURCE_ROOT [PATH/TO/libswitchyard.so]
"""
import glob
import os
import re
import subprocess
import sys

# lowest first; a module may use its own layer and the ones before it
LAYERS = [
    ["util", "idtab"],
    ["factory", "registry", "values", "publish", "publish_int",
     "service", "service_int", "service_ring", "service_select"],
    ["compile_env"],
    ["regex", "pattern", "predicate", "filter", "filter_int", "filter_plan"],
    ["route"],
    ["index"],
    ["def", "def_build", "def_route", "def_entry", "def_canon"],
    ["snapshot"],
    ["diff"],
    ["match", "select"],
    ["report"],
    ["router"],
]


def main():
    root = sys.argv[1]
    layer = {m: i for i, ms in enumerate(LAYERS) for m in ms}
    files = sorted(glob.glob(os.path.join(root, "lib", "*.[ch]")))
    name = lambda f: os.path.basename(f)[:-2]
    texts = {f: open(f, encoding="utf-8").read() for f in files}
    defined = {}
    for f in files:
        if f.endswith(".c"):
            for fn in re.findall(
                    r"^[A-Za-z_][^\n;(]*?\b((?:sy|svc)_[a-z0-9_]+)\(",
                    texts[f], re.M):
                defined.setdefault(fn, name(f))
    n = 0
    failed = 0

    def report(ok, what, details=()):
        nonlocal n, failed
        n += 1
        if not ok:
            failed += 1
        print(("ok" if ok else "not ok") + " %d - %s" % (n, what))
        for d in details:
            print("# " + d)

    unknown = [name(f) for f in files if name(f) not in layer]
    report(not unknown, "every lib/ file has a layer",
           ["no layer for: " + ", ".join(unknown)] if unknown else [])
    report(len(files) > 20, "found lib/ (%d files)" % len(files))
    up = []
    for f in files:
        m = name(f)
        if m not in layer:
            continue
        for inc in re.findall(r'#include "([a-z_]+)\.h"', texts[f]):
            if inc in layer and layer[inc] > layer[m]:
                up.append("%s includes %s.h" % (os.path.basename(f), inc))
        if f.endswith(".c"):
            for fn in sorted(set(re.findall(r"\b((?:sy|svc)_[a-z0-9_]+)\(",
                                            texts[f]))):
                d = defined.get(fn)
                if d and d != m and d in layer and layer[d] > layer[m]:
                    up.append("%s calls %s (%s.c)" %
                              (os.path.basename(f), fn, d))
    report(not up, "no include or call goes to a higher layer", up)

    if len(sys.argv) > 2:
        nm = subprocess.run(["nm", "-D", "--defined-only", sys.argv[2]],
                            capture_output=True, text=True)
        exported = {f[2] for f in (l.split() for l in nm.stdout.splitlines())
                    if len(f) == 3 and f[1] in "TDBRVW"}
        header = open(os.path.join(root, "include", "switchyard.h"),
                      encoding="utf-8").read()
        declared = set(re.findall(r"^SY_API[^;(]*?\b(sy_[a-z0-9_]+)\s*\(",
                                  header, re.M))
        report(nm.returncode == 0 and exported,
               "the library exports symbols (%d)" % len(exported),
               [nm.stderr.strip()] if nm.returncode else [])
        report(len(declared) >= 50,
               "switchyard.h declares the public API (%d calls)" %
               len(declared))
        leaked = sorted(exported - declared)
        report(not leaked,
               "every exported symbol is an SY_API call of switchyard.h",
               ["exported but not public: " + " ".join(leaked)] if leaked
               else [])
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
