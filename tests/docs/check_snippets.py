#!/usr/bin/python3
"""check_snippets.py - compile every C snippet of the docs against the
library, so a doc cannot drift from include/switchyard.h (TAP output).

Usage: check_snippets.py --cc CC [--cc-arg ARG]... --include DIR
                         --libdir DIR [--root DIR] (FILE.md | DIR)...

Each Markdown file becomes one C translation unit, compiled with -Werror
(unused names allowed) and linked as a shared object against
libswitchyard; every sy_* symbol it uses must be exported by the library,
so a misspelt, removed or never implemented call fails:

  * every ```c block is compiled, in the order of the file; ```c fragment
    (any info string with the word "fragment") is skipped: use it for
    pseudo-code only;
  * top-level function definitions in a block (a line at column 0 such as
    `static int load(void *data, ...) {` through its closing `}` at column
    0) stay at file scope, so later blocks can use them; `#include` lines
    go to the top; everything else in a block is the body of a function of
    its own, in its own scope;
  * names a walk-through uses without declaring them (the host's own
    functions and variables: `die`, `body`, `router`...) are declared in
    an HTML comment that the rendered page does not show:
        <!-- c-prelude
        static sy_router *router;
        void die(const char *fmt, ...);
        -->
    A c-prelude is at file scope, before the blocks, and may appear
    anywhere in the file.
  * a page whose snippets run as they stand gives them a main in another
    hidden comment, `<!-- c-run ... -->` (it calls the body functions,
    sy_doc_snippet_N for the Nth block, after setting what the prelude
    declares): the page is then also linked as a program and run, which
    must exit 0 and write nothing on stderr (the snippets print there
    when a call fails). It runs under valgrind (--error-exitcode) when
    valgrind is installed and the build has no sanitizer (--sanitize,
    meson's b_sanitize), else with the sanitizer linked in. The
    comment's first line is its title; the code starts on the next.
  * <stdbool.h>, <stddef.h>, <stdint.h>, <inttypes.h>, <stdio.h>,
    <stdlib.h>, <string.h> and <switchyard.h> are always included.

Compiler messages point at the Markdown file and line (#line). One TAP
line per snippet (not ok when the compiler reports an error inside it),
plus one per file for the prelude and the link, plus one per file for the
prose: every `sy_call(a, b)` in a code span must have as many arguments as
its declaration in switchyard.h (write `...` for arguments left out), and
every sy_/SY_ name in a code span must exist in the header or the sources
(`sy_router_*` names a family and is not checked).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import List, Tuple

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
PRELUDE = re.compile(r"<!--[ \t]*c-prelude\b[^\n]*\n(.*?)-->", re.S)
RUN = re.compile(r"<!--[ \t]*c-run\b[^\n]*\n(.*?)-->", re.S)
KEYWORDS = {"if", "for", "while", "switch", "return", "else", "do", "case",
            "sizeof", "goto", "default"}
HEAD = re.compile(r"^([A-Za-z_][\w \t\*]*?)[\s\*]([A-Za-z_]\w*)\s*\(")

FLAGS = ["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra",
         "-Wpedantic", "-Werror", "-Wno-unused-function",
         "-Wno-unused-variable", "-Wno-unused-parameter",
         "-Wno-unused-but-set-variable", "-Wno-unused-label",
         "-fPIC", "-shared"]

HEADERS = ["stdbool.h", "stddef.h", "stdint.h", "inttypes.h", "stdio.h",
           "stdlib.h", "string.h", "switchyard.h"]


def is_function_head(line: str) -> bool:
    """A line at column 0 that starts a function definition."""
    if not line or line[0] in " \t#/}{" or line.rstrip().endswith(";"):
        return False
    m = HEAD.match(line)
    if not m:
        return False
    first = line.split("(", 1)[0]
    if "=" in first:
        return False
    words = re.findall(r"[A-Za-z_]\w*", m.group(1))
    return bool(words) and words[0] not in KEYWORDS


def split_block(lines: List[str]) -> Tuple[List[Tuple[int, str]],
                                           List[Tuple[int, str]],
                                           List[Tuple[int, str]]]:
    """(includes, file-scope lines, body lines), each (offset, text)."""
    includes, top, body = [], [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#include"):
            includes.append((i, line))
            i += 1
            continue
        if is_function_head(line):
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith("{"):
                j += 1
            while j < len(lines) and lines[j].rstrip() != "}":
                j += 1
            for k in range(i, min(j + 1, len(lines))):
                top.append((k, lines[k]))
            i = j + 1
            continue
        body.append((i, line))
        i += 1
    return includes, top, body


class Snippet:
    def __init__(self, index: int, line: int, end: int) -> None:
        self.index = index
        self.line = line  # first line of the code in the .md (1-based)
        self.end = end    # last line


def build_unit(path: str, text: str) -> Tuple[str, List[Snippet], int]:
    """The C source for one Markdown file, its snippets, skipped count."""
    rel = path
    out: List[str] = []
    hoisted: List[str] = []
    tops: List[str] = []
    bodies: List[str] = []
    snippets: List[Snippet] = []
    skipped = 0

    def at(line: int) -> str:
        return f'#line {line} "{rel}"'

    for m in PRELUDE.finditer(text):
        line = text.count("\n", 0, m.start(1)) + 1
        tops.append(at(line))
        tops.append(m.group(1))
    for m in FENCE.finditer(text):
        info = m.group(1).strip().split()
        if not info or info[0] != "c":
            continue
        code = m.group(2)
        first = text.count("\n", 0, m.start(2)) + 1
        if "fragment" in info[1:]:
            skipped += 1
            continue
        lines = code.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        snip = Snippet(len(snippets) + 1, first, first + len(lines) - 1)
        snippets.append(snip)
        includes, top, body = split_block(lines)
        for off, line in includes:
            hoisted.append(at(first + off))
            hoisted.append(line)
        prev = None
        for off, line in top:
            if prev is None or off != prev + 1:
                tops.append(at(first + off))
            tops.append(line)
            prev = off
        if body:
            bodies.append(f"void sy_doc_snippet_{snip.index}(void);")
            bodies.append(f"void sy_doc_snippet_{snip.index}(void) {{")
            prev = None
            for off, line in body:
                if prev is None or off != prev + 1:
                    bodies.append(at(first + off))
                bodies.append(line)
                prev = off
            bodies.append("}")
    out.extend(f"#include <{h}>" for h in HEADERS)
    out.extend(hoisted)
    out.extend(tops)
    out.extend(bodies)
    return "\n".join(out) + "\n", snippets, skipped


def header_api(header: str) -> Tuple[dict, set]:
    """{function: parameter count} and every sy_/SY_ name of the header."""
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    names = set(re.findall(r"\b(?:sy|SY)_\w+", text))
    arity = {}
    for m in re.finditer(r"SY_API[^;{]*?\b(sy_\w+)\s*\(((?:[^()]|\([^()]*\))*)\)\s*;",
                         text, re.S):
        params = m.group(2).strip()
        arity[m.group(1)] = 0 if params in ("", "void") else count_args(params)
    return arity, names


def count_args(args: str) -> int:
    depth, n = 0, 1
    for ch in args:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            n += 1
    return n


def source_names(root: str) -> set:
    """sy_/SY_ names used anywhere in the sources (internal calls, test
    variables), which docs about internals may name."""
    found: set = set()
    for top in ("lib", "tests", "examples", "bindings", "include"):
        for dirpath, _, filenames in os.walk(os.path.join(root, top)):
            for f in filenames:
                if f.endswith((".c", ".h", ".py", ".sh", ".build")):
                    with open(os.path.join(dirpath, f), encoding="utf-8",
                              errors="replace") as fh:
                        found.update(re.findall(r"\b(?:sy|SY)_\w+", fh.read()))
    return found


CALL = re.compile(r"\b(sy_\w+)\(((?:[^()]|\([^()]*\))*)\)")


def inline_mismatches(text: str, arity: dict, names: set) -> List[str]:
    """Calls in `code spans` (outside code blocks) whose argument count
    differs from the header's, and sy_/SY_ names the header lacks.
    Arguments written `...` are not counted; `sy_router_*` is a family."""
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    prose = PRELUDE.sub(lambda m: "\n" * m.group(0).count("\n"), prose)
    prose = RUN.sub(lambda m: "\n" * m.group(0).count("\n"), prose)
    bad = []
    for m in re.finditer(r"`([^`\n]+)`", prose):
        span = m.group(1)
        line = prose.count("\n", 0, m.start()) + 1
        for name in re.findall(r"\b(?:sy|SY)_\w+(?![\w*])", span):
            if name not in names:
                bad.append(f"line {line}: `{span}`: {name} is in neither "
                           "switchyard.h nor the sources")
        for c in CALL.finditer(span):
            name, args = c.group(1), c.group(2).strip()
            if name not in arity or "..." in args or not args:
                continue  # `sy_call()` names the call without its arguments
            got = count_args(args)
            if got != arity[name]:
                bad.append(f"line {line}: `{span}`: {name} takes "
                           f"{arity[name]} arguments, not {got}")
    return bad


def symbols(path: str, *flags: str) -> List[str]:
    out = subprocess.run(["nm", "-D", *flags, path], capture_output=True,
                         text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def missing_api(so: str, libdir: str) -> List[str]:
    """sy_* symbols the snippets use that the library does not export (the
    host's own names, declared in a c-prelude, may stay undefined)."""
    lib = os.path.join(libdir, "libswitchyard.so")
    exported = set(symbols(lib, "--defined-only"))
    return sorted(name for name in symbols(so, "--undefined-only")
                  if name.startswith("sy_") and name not in exported)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", required=True)
    ap.add_argument("--cc-arg", action="append", default=[])
    ap.add_argument("--include", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--root", default=".",
                    help="paths in messages are relative to this")
    ap.add_argument("--sanitize", default="none",
                    help="meson's b_sanitize: linked into c-run programs")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    n = failed = 0

    def tap(ok: bool, name: str, detail: str = "") -> None:
        nonlocal n, failed
        n += 1
        if not ok:
            failed += 1
        print(f"{'ok' if ok else 'not ok'} {n} - {name}")
        for line in detail.splitlines()[:60]:
            print(f"# {line}")

    paths: List[str] = []
    for p in a.files:  # a directory stands for its *.md files
        if os.path.isdir(p):
            paths += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith(".md"))
        else:
            paths.append(p)
    arity, names = header_api(os.path.join(a.include, "switchyard.h"))
    names |= source_names(a.root)
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            rel = os.path.relpath(path, a.root)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            bad = inline_mismatches(text, arity, names)
            tap(not bad, f"{rel}: calls and names in the text match "
                "switchyard.h", "\n".join(bad))
            src, snippets, skipped = build_unit(rel, text)
            if not snippets:
                print(f"# {rel}: no C snippet ({skipped} fragment(s) skipped)")
                continue
            c_file = os.path.join(tmp, "doc.c")
            with open(c_file, "w", encoding="utf-8") as f:
                f.write(src)
            cmd = [a.cc, *a.cc_arg, *FLAGS, f"-I{a.include}", c_file,
                   "-o", os.path.join(tmp, "doc.so"), f"-L{a.libdir}",
                   "-lswitchyard"]
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  cwd=a.root, check=False)
            log = proc.stderr + proc.stdout
            if proc.returncode == 0:
                missing = missing_api(os.path.join(tmp, "doc.so"), a.libdir)
                if missing:
                    proc = subprocess.CompletedProcess(cmd, 1)
                    log = ("calls not exported by libswitchyard: "
                           + ", ".join(missing))
            where = re.compile(re.escape(rel) + r":(\d+):(?:\d+:)? (?:fatal )?error")
            bad_lines = [int(x) for x in where.findall(log)]
            claimed = set()
            for s in snippets:
                mine = [ln for ln in bad_lines if s.line <= ln <= s.end]
                claimed.update(mine)
                detail = "\n".join(l for l in log.splitlines()
                                   if any(f"{rel}:{ln}:" in l for ln in mine))
                tap(not mine, f"{rel}:{s.line} snippet {s.index} compiles",
                    detail)
            tap(proc.returncode == 0,
                f"{rel}: the whole file compiles and links against "
                "libswitchyard"
                + (f" ({skipped} fragment(s) skipped)" if skipped else ""),
                "" if proc.returncode == 0 else
                "(errors inside snippets are listed above)\n" + log
                if claimed else log)
            if proc.returncode == 0 and RUN.search(text):
                ok, why = run_page(a, rel, text, src, tmp)
                tap(ok, f"{rel}: runs as shown (its c-run main)", why)
    print(f"1..{n}")
    return 1 if failed else 0


def run_page(a, rel: str, text: str, src: str, tmp: str) -> Tuple[bool, str]:
    """Link the page with its c-run main as a program and run it: (ok,
    what went wrong)."""
    m = RUN.search(text)
    line = text.count("\n", 0, m.start(1)) + 1
    c_file = os.path.join(tmp, "run.c")
    with open(c_file, "w", encoding="utf-8") as f:
        f.write(src + f'#line {line} "{rel}"\n' + m.group(1))
    exe = os.path.join(tmp, "run")
    flags = [x for x in FLAGS if x not in ("-fPIC", "-shared")]
    if a.sanitize != "none":
        flags.append(f"-fsanitize={a.sanitize}")
    cmd = [a.cc, *a.cc_arg, *flags, f"-I{a.include}", c_file, "-o", exe,
           f"-L{a.libdir}", "-lswitchyard", f"-Wl,-rpath,{a.libdir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=a.root,
                          check=False)
    if proc.returncode:
        return False, "the c-run program does not link:\n" + proc.stderr
    run = [exe]
    env = dict(os.environ)
    # a walk-through ends without freeing what it made: not a leak to
    # report (valgrind is run without its leak check for the same reason)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                           ":detect_leaks=0").lstrip(":")
    if a.sanitize == "none" and shutil.which("valgrind"):
        run = ["valgrind", "-q", "--error-exitcode=99", "--leak-check=no",
               *run]
    try:
        proc = subprocess.run(run, capture_output=True, text=True,
                              timeout=300, check=False, env=env)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    if proc.returncode or proc.stderr:
        return False, (f"{' '.join(run[:-1] + ['<page>'])}: exit status "
                       f"{proc.returncode}\n{proc.stderr}{proc.stdout}")
    return True, ""


if __name__ == "__main__":
    sys.exit(main())
