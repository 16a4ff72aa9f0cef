"""The command-line tool, mirroring the C ``switchyard`` program.

    python3 -m switchyard check FILE...
    python3 -m switchyard match [--json] [-H 'Name: value']... [--remote-addr IP]
                                [--now ISO8601|MS] [--seed N] FILE... METHOD URL
    python3 -m switchyard explain [same options as match] FILE... METHOD URL
    python3 -m switchyard diff [--json] OLD NEW

Exit status: 0 ok (check: all valid; match: a route matched), 1 a document
is invalid or no route matched, 2 usage or I/O errors. All the routing
logic is the library's.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any, List, Optional, Sequence, TextIO, Tuple

from ._core import diff, parse
from ._errors import SwitchyardError
from ._router import Router
from ._types import Request

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def _describe(exc: SwitchyardError) -> str:
    return f"{exc} [{exc.code_name}]"


def _header(value: str) -> Tuple[str, str]:
    name, sep, val = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(
            f"header must look like 'Name: value', got {value!r}")
    return name.strip(), val.strip()


def _now(value: str) -> Any:
    if value.lstrip("-").isdigit():
        return int(value)
    text = value.split("[", 1)[0]  # drop an SCG-style [Zone/Id] suffix
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--now wants ISO-8601 or epoch milliseconds, got {value!r}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m switchyard",
        description="Check, match, explain and diff Spring Cloud Gateway "
                    "route documents with libswitchyard.")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help="validate route documents")
    c.add_argument("files", nargs="+", metavar="FILE")

    for name, help_ in (("match", "match one request"),
                        ("explain", "why each route does or does not match")):
        m = sub.add_parser(name, help=help_)
        m.add_argument("--json", action="store_true", help="JSON output")
        m.add_argument("-H", "--header", dest="headers", action="append",
                       type=_header, default=[], metavar="'Name: value'")
        m.add_argument("--remote-addr", default=None, metavar="IP")
        m.add_argument("--now", type=_now, default=None, metavar="ISO8601")
        m.add_argument("--seed", type=int, default=0, metavar="N")
        m.add_argument("files", nargs="+", metavar="FILE")
        m.add_argument("method", metavar="METHOD")
        m.add_argument("url", metavar="URL")

    d = sub.add_parser("diff", help="diff two route documents")
    d.add_argument("--json", action="store_true", help="JSON output")
    d.add_argument("old", metavar="OLD")
    d.add_argument("new", metavar="NEW")
    return p


def _check(files: Sequence[str], out: TextIO, err: TextIO) -> int:
    rc = EXIT_OK
    for path in files:
        try:
            raw = _read(path)
        except OSError as exc:
            print(f"{path}: {exc.strerror or exc}", file=err)
            rc = max(rc, EXIT_USAGE)
            continue
        try:
            with parse(raw) as doc:
                version = doc.version
                n = len(doc)
        except SwitchyardError as exc:
            print(f"{path}: {_describe(exc)}", file=err)
            rc = max(rc, EXIT_FAIL)
            continue
        v = f", version {version}" if version is not None else ""
        print(f"{path}: ok, {n} route{'s' if n != 1 else ''}{v}", file=out)
    return rc


def _router(files: Sequence[str], err: TextIO) -> Optional[Router]:
    router = Router()
    for path in files:
        try:
            raw = _read(path)
            router.add_source(path)
            router.apply(path, raw)
        except OSError as exc:
            print(f"{path}: {exc.strerror or exc}", file=err)
            router.close()
            return None
        except SwitchyardError as exc:
            print(f"{path}: {_describe(exc)}", file=err)
            router.close()
            return None
    return router


def _request(args: argparse.Namespace) -> Request:
    return Request(method=args.method.upper(), url=args.url,
                   headers=tuple(args.headers), remote_addr=args.remote_addr,
                   now=args.now, seed=args.seed)


def _match(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    router = _router(args.files, err)
    if router is None:
        return EXIT_USAGE
    with router, router.acquire() as snap:
        m = snap.match(_request(args))
    if args.json:
        json.dump(None if m is None else m.to_dict(), out, indent=2)
        out.write("\n")
        return EXIT_OK if m is not None else EXIT_FAIL
    if m is None:
        print("no match", file=out)
        return EXIT_FAIL
    u = m.upstream
    print(f"route: {m.route_id}", file=out)
    if u.kind.name == "URL":
        target = f"{u.scheme}://{u.host}:{u.port}"
    elif u.kind.name == "SERVICE":
        target = f"lb://{u.host}"
    elif u.kind.name == "FORWARD":
        target = f"forward:{u.path}"
    else:
        target = "no://op"
    print(f"upstream: {target}", file=out)
    print(f"action: {m.action.name.lower()}", file=out)
    if m.status:
        print(f"status: {m.status}", file=out)
    if m.redirect is not None:
        print(f"location: {m.redirect}", file=out)
    print(f"path: {m.path}", file=out)
    if m.query:
        print(f"query: {m.query}", file=out)
    for name, value in m.vars.items():
        print(f"var: {name}={value}", file=out)
    for name, value in m.headers:
        print(f"header: {name}: {value}", file=out)
    if m.preserve_host:
        print("preserve-host: true", file=out)
    for op in m.response_ops:
        print(f"response: {op.kind.name.lower()} {op.name}"
              f"{' ' + op.value if op.value else ''}"
              f"{' (' + op.arg + ')' if op.arg else ''}", file=out)
    for f in m.host_filters:
        args_ = ", ".join(f"{k}={v}" for k, v in f.args)
        print(f"filter: {f.name}({args_})", file=out)
    return EXIT_OK


def _explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    router = _router(args.files, err)
    if router is None:
        return EXIT_USAGE
    with router, router.acquire() as snap:
        steps = snap.explain(_request(args))
    matched = any(s.matched for s in steps)
    if args.json:
        json.dump([{"id": s.route_id, "matched": s.matched,
                    "failed_predicate": s.failed_predicate,
                    "failed_name": s.failed_name} for s in steps],
                  out, indent=2)
        out.write("\n")
        return EXIT_OK if matched else EXIT_FAIL
    for s in steps:
        if s.matched:
            print(f"{s.route_id}: matched", file=out)
        elif s.failed_predicate is not None and s.failed_predicate < 0:
            print(f"{s.route_id}: {s.failed_name}", file=out)
        else:
            print(f"{s.route_id}: failed predicates[{s.failed_predicate}] "
                  f"{s.failed_name}", file=out)
    return EXIT_OK if matched else EXIT_FAIL


def _diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    docs = []
    for path in (args.old, args.new):
        try:
            docs.append(parse(_read(path)))
        except OSError as exc:
            print(f"{path}: {exc.strerror or exc}", file=err)
            return EXIT_USAGE
        except SwitchyardError as exc:
            print(f"{path}: {_describe(exc)}", file=err)
            return EXIT_FAIL
    d = diff(docs[0], docs[1])
    for doc in docs:
        doc.close()
    if args.json:
        json.dump(d.to_dict(), out)
        out.write("\n")
        return EXIT_OK
    for rid in d.added:
        print(f"+ {rid}", file=out)
    for rid in d.removed:
        print(f"- {rid}", file=out)
    for rid, changed in d.updated:
        print(f"~ {rid} ({', '.join(changed.names())})", file=out)
    print(f"{d.unchanged} unchanged", file=out)
    return EXIT_OK


def main(argv: Optional[List[str]] = None, out: Optional[TextIO] = None,
         err: Optional[TextIO] = None) -> int:
    """Run the tool; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    try:
        if args.command == "check":
            return _check(args.files, out, err)
        if args.command == "match":
            return _match(args, out, err)
        if args.command == "explain":
            return _explain(args, out, err)
        return _diff(args, out, err)
    except SwitchyardError as exc:
        print(f"switchyard: {_describe(exc)}", file=err)
        return EXIT_USAGE
