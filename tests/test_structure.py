#!/usr/bin/env python3
"""test_structure.py - TAP checks of the structure docs/architecture.md
promises:
- layers ("Modules"): every #include "x.h" and every call of a function
  defined in another lib/*.c file goes to the same or a lower layer, so the
  modules have no loop, nor do two files (calls between .c files,
  includes of headers). A new lib/ file must be given a layer here.
- names ("Names"): the shared library exports only calls declared with
  SY_API in include/switchyard.h; nothing internal leaks out; internal
  names are sy__ (public ones sy_), so a call tells which it is.

- sizes: a lib/ file under ~900 lines, an examples/ file under ~1,200.

- the static library (what a host links into its own binary) defines no
  global symbol outside the sy_/sy__ names, so it cannot clash with a
  host's own symbols.

Usage: test_structure.py SOURCE_ROOT [libswitchyard.so [libswitchyard.a]]
"""
import ast
import glob
import os
import re
import subprocess
import sys

# Lowest floor first: a folder of lib/ per floor, each holding its layers
# (lowest first). A layer holds modules; a module is one file or a family
# of files that share a private header (service*.c with service_int.h). A
# file may use its own layer and the layers below, and the modules must
# not use each other in a loop (files of one module may). A file lives in
# its floor's folder, and includes name the folder ("base/util.h").
FLOORS = [
    ("base", [
        [("alloc_small",)],
        [("alloc_map",)],
        [("util",), ("idtab",)],
        [("factory",), ("registry",), ("values",), ("path_normalize",),
         ("budget",)],
        [("regex",)],
    ]),
    ("service", [
        [("service", "service_int", "service_delta", "service_hrw",
          "service_select", "service_health")],
    ]),
    ("policy", [
        [("policy_args",), ("store",), ("host_runs",)],
        [("keyresolve",)],
        [("ratelimit",), ("breaker",), ("retry",)],
    ]),
    ("route", [
        [("compile_env",)],
        [("pattern", "pattern_int", "pattern_elem", "pattern_host",
          "pattern_split", "pattern_cover"),
         ("predicate", "predicate_int", "predicate_eval", "predicate_cover",
          "predicate_quick"),
         ("filter", "filter_int", "filter_plan", "filter_plan_int",
          "filter_headers", "filter_template", "filter_query", "filter_path")],
        [("route", "route_host_check")],
    ]),
    ("def", [
        [("def", "def_build", "def_route", "def_metadata", "def_entry",
          "def_canon",
          "def_probe", "def_scan", "def_tree", "def_single", "def_memo",
          "def_shortcut", "def_check", "def_json", "def_breakers"),
         ("instances",)],
    ]),
    ("snapshot", [
        [("publish", "publish_int")],
        [("index", "index_build", "index_int", "index_layout", "index_step",
          "index_lookup", "index_cand", "index_hash")],
        [("snapshot", "snapshot_layout", "snapshot_int", "snapshot_table",
          "snapshot_overlay",
          "snapshot_build", "snapshot_services")],
        [("diff",), ("shadow",)],
    ]),
    ("request", [
        [("match", "match_ctx", "match_plan", "match_result"), ("select",), ("target",)],
        [("policy_match",)],
    ]),
    ("router", [
        [("report",)],
        [("router", "router_int", "router_core", "router_status", "commit",
          "commit_int", "commit_steps", "commit_reuse", "commit_brk",
          "change_set")],
    ]),
]
LAYERS = [layer for _, layers in FLOORS for layer in layers]
FLOOR_OF = {f: floor for floor, layers in FLOORS for mods in layers
            for m in mods for f in m}


def loops(edges):
    """Strongly connected groups of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    root = sys.argv[1]
    layer = {f: i for i, mods in enumerate(LAYERS) for m in mods for f in m}
    module = {f: m[0] for mods in LAYERS for m in mods for f in m}
    files = sorted(glob.glob(os.path.join(root, "lib", "*", "*.[ch]")))
    loose = sorted(glob.glob(os.path.join(root, "lib", "*.[ch]")))
    name = lambda f: os.path.basename(f)[:-2]
    texts = {f: open(f, encoding="utf-8").read() for f in files}
    defined = {}
    for f in files:
        if f.endswith(".c"):
            for fn in re.findall(
                    r"^[A-Za-z_][^\n;(]*?\b(sy_[a-z0-9_]+)\(",
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
    report(not loose, "no loose file at the top of lib/",
           [os.path.basename(f) for f in loose])
    misplaced = ["%s in %s/, its floor is %s/" % (
        os.path.basename(f), os.path.basename(os.path.dirname(f)),
        FLOOR_OF[name(f)]) for f in files if name(f) in FLOOR_OF
        and os.path.basename(os.path.dirname(f)) != FLOOR_OF[name(f)]]
    report(not misplaced, "every lib/ file lives in its floor's folder",
           misplaced)
    badinc = []
    for f in files:
        for folder, inc in re.findall(r'#include "(?:([a-z_]+)/)?([a-z_]+)\.h"',
                                      texts[f]):
            if inc in FLOOR_OF and folder != FLOOR_OF[inc]:
                badinc.append('%s includes "%s%s.h" (lib/%s/%s.h)' % (
                    os.path.basename(f), folder + "/" if folder else "", inc,
                    FLOOR_OF[inc], inc))
    report(not badinc, "every include names the folder of its header",
           badinc)
    up = []
    uses = {}  # module -> modules it uses
    for f in files:
        m = name(f)
        if m not in layer:
            continue
        used = [(inc, "includes %s.h" % inc) for inc in
                re.findall(r'#include "(?:[a-z_]+/)?([a-z_]+)\.h"', texts[f])]
        if f.endswith(".c"):
            used += [(defined[fn], "calls %s (%s.c)" % (fn, defined[fn]))
                     for fn in sorted(set(re.findall(
                         r"\b(sy_[a-z0-9_]+)\(", texts[f])))
                     if fn in defined]
        for d, how in used:
            if d == m or d not in layer:
                continue
            if layer[d] > layer[m]:
                up.append("%s %s" % (os.path.basename(f), how))
            if module[d] != module[m]:
                uses.setdefault(module[m], set()).add(module[d])
    report(not up, "no include or call goes to a higher layer", up)
    found = loops(uses)
    report(not found, "no modules use each other in a loop",
           ["loop: " + " -> ".join(g) for g in found])
    # Files, not modules: a .c file uses the headers it includes and the
    # .c files that define what it calls; a header the headers it includes.
    file_uses = {}
    for f in files:
        base = os.path.basename(f)
        used = {inc + ".h" for inc in re.findall(
            r'#include "(?:[a-z_]+/)?([a-z_]+)\.h"', texts[f])}
        if f.endswith(".c"):
            used |= {defined[fn] + ".c" for fn in set(re.findall(
                r"\b(sy_[a-z0-9_]+)\(", texts[f])) if fn in defined}
        file_uses[base] = used - {base}
    found = loops(file_uses)
    report(not found, "no two lib/ files use each other in a loop",
           ["loop: " + " -> ".join(g) for g in found])

    pkg = os.path.join(root, "bindings", "python", "switchyard")
    pyimports = {}
    for f in sorted(glob.glob(os.path.join(pkg, "*.py"))):
        mod = os.path.basename(f)[:-3]
        text = open(f, encoding="utf-8").read()
        used = set(re.findall(r"^\s*from \.(\w+) import", text, re.M))
        for names in re.findall(r"^\s*from \. import ([\w, ]+)", text, re.M):
            used |= {n.strip().split(" ")[0] for n in names.split(",")}
        pyimports[mod] = used - {mod, "__init__"}
    found = loops(pyimports)
    report(bool(pyimports) and not found,
           "no two modules of the Python package import each other",
           ["loop: " + " -> ".join(g) for g in found])
    # an import inside a function or class hides a dependency from the
    # module's head (and from the loop check above, which reads it there)
    nested = []
    for f in sorted(glob.glob(os.path.join(pkg, "*.py"))):
        tree = ast.parse(open(f, encoding="utf-8").read(), f)
        for top in ast.walk(tree):
            if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef,
                                ast.ClassDef)):
                nested += ["%s:%d" % (os.path.basename(f), node.lineno)
                           for node in ast.walk(top)
                           if isinstance(node, (ast.Import, ast.ImportFrom))]
    report(bool(pyimports) and not nested,
           "the Python package imports only at the head of its modules",
           ["import inside a function or class: " + " ".join(
               sorted(set(nested)))] if nested else [])

    # code, tests and their data say what they check, not which issue
    # asked for it: an issue number tells a reader nothing the tree keeps
    cites = []
    for top in ("include", "lib", "bindings", "examples", "tests"):
        for d, subdirs, names in os.walk(os.path.join(root, top)):
            subdirs[:] = [s for s in subdirs if s != "__pycache__"]
            for fn in names:
                path = os.path.join(d, fn)
                try:
                    text = open(path, encoding="utf-8").read()
                except (UnicodeDecodeError, OSError):
                    continue  # not text
                for i, line in enumerate(text.splitlines(), 1):
                    if re.search(r"\bissues? ?#?[0-9]+|\(#[0-9]+\)", line,
                                 re.I):
                        cites.append("%s:%d" % (os.path.relpath(path, root),
                                                i))
    report(not cites, "no code, test or test data points at an issue number",
           cites[:20])
    # rooms of a size one can read: a lib/ file under ~900 lines, a file of
    # the hosts and the tool (examples/) under ~1,200 (docs/architecture.md)
    big = []
    for top, most in (("lib", 920), ("examples", 1220)):
        for d, subdirs, names in os.walk(os.path.join(root, top)):
            for fn in names:
                if not fn.endswith((".c", ".h", ".py", ".html", ".sh")):
                    continue
                path = os.path.join(d, fn)
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = sum(1 for _ in f)
                if lines > most:
                    big.append("%s: %d lines (at most %d)" %
                               (os.path.relpath(path, root), lines, most))
    report(not big, "every lib/ file under ~900 lines, every examples/ "
           "file under ~1,200", big)
    # a file of the tree that code or a doc cites by its path exists (from
    # the top of the tree, or from the citing file's folder: meson's
    # files() and relative links)
    cited = re.compile(r"(?<![\w./-])((?:docs|tests|lib|examples|bindings|"
                       r"include)/[\w./-]*[\w-]\.(?:md|c|h|py|sh|json|tsv|"
                       r"build|yml|yaml|conf|png|txt))\b")
    paths = [os.path.join(root, "README.md")]
    for top in ("include", "lib", "bindings", "examples", "tests", "docs"):
        for d, subdirs, names in os.walk(os.path.join(root, top)):
            subdirs[:] = [s for s in subdirs if s != "__pycache__"]
            paths += [os.path.join(d, fn) for fn in names]
    gone = []
    for path in paths:
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue  # not text
        for i, line in enumerate(text.splitlines(), 1):
            for f in cited.findall(line):
                if not (os.path.exists(os.path.join(root, f)) or
                        os.path.exists(os.path.join(os.path.dirname(path),
                                                    f))):
                    gone.append("%s:%d cites %s" % (
                        os.path.relpath(path, root), i, f))
    report(not gone, "every file of the tree a file cites by path exists",
           gone[:20])

    header = open(os.path.join(root, "include", "switchyard.h"),
                  encoding="utf-8").read()
    public = set(re.findall(r"\bsy_(?!_)[a-z0-9_]+\b", header))
    stray = set()
    for f in files:
        for w in re.findall(r"\bsy_(?!_)[a-z0-9_]+\b", texts[f]):
            if w in public or (w.endswith("_") and any(
                    p.startswith(w) for p in public)):
                continue
            stray.add("%s in %s" % (w, os.path.basename(f)))
    report(not stray,
           "every sy_ name in lib/ is public API (internal names are sy__)",
           ["internal but named sy_: " + " ".join(sorted(stray))] if stray
           else [])
    internal_in_header = sorted(set(re.findall(r"\bsy__[a-z0-9_]+", header)))
    report(not internal_in_header, "switchyard.h names no internal sy__ name",
           internal_in_header)

    if len(sys.argv) > 2:
        nm = subprocess.run(["nm", "-D", "--defined-only", sys.argv[2]],
                            capture_output=True, text=True)
        exported = {f[2] for f in (l.split() for l in nm.stdout.splitlines())
                    if len(f) == 3 and f[1] in "TDBRVW"}
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
    if len(sys.argv) > 3:
        nm = subprocess.run(["nm", "-g", "--defined-only", sys.argv[3]],
                            capture_output=True, text=True)
        globs = sorted({f[2] for f in (l.split() for l in
                                        nm.stdout.splitlines())
                        if len(f) == 3 and f[1] in "TDBRVWC"})
        # (sanitizer builds add their own __odr_asan.* and the like)
        stray = [s for s in globs if not s.startswith(("sy_", "__"))]
        report(nm.returncode == 0 and bool(globs) and not stray,
               "the static library defines only sy_/sy__ globals (%d)" %
               len(globs), ["unprefixed: " + " ".join(stray)] if stray
               else [nm.stderr.strip()] if nm.returncode else [])
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
