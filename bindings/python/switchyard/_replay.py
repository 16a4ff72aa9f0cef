"""``switchyard diff --requests FILE OLD NEW``: recorded requests replayed
through two route documents, as the C tool's examples/cli/cli_replay.c
does, with the same output. FILE: ``METHOD URL`` lines (headers after a
tab each), nginx's combined log format, or the mini-gateway's JSON access
log, told apart by the first request line."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, TextIO, Tuple

from ._errors import SwitchyardError

_FORMATS = ("plain", "nginx combined", "access log JSON")


HELP = ('usage: switchyard diff --requests FILE [--json] [--instances FILE] OLD NEW\n'
        'Replay recorded requests through both route documents and list each request\n'
        'whose route, upstream or instance changes, then how many were re-routed, by\n'
        'route pair. FILE has one request a line: METHOD URL (then Name: value\n'
        "headers, each after a tab), nginx's combined log format, or the\n"
        "mini-gateway's JSON access log (told apart by the first line).\n"
        '\n'
        'options:\n'
        '  --json             print {"requests": N, "changed": [{"method", "url",\n'
        '                     "old_route", "new_route", ...}], "summary": [...]} (null:\n'
        '                     no route)\n'
        '  --instances FILE   service instances for lb:// routes, the same for both\n'
        '  -h, --help         show this help\n'
        '\n'
        'exit status: 0 the replay ran (changes or not), 2 usage errors, unreadable or\n'
        'invalid input (a bad line is named FILE:LINE).\n'
        '\n'
        'example:\n'
        '  switchyard diff --requests access.log --json routes-v1.json routes-v2.json\n')


class _Bad(Exception):
    pass


def _detect(line: str) -> int:
    if line.startswith("{"):
        return 2
    b = line.find("[")
    if " - " in line and b >= 0 and "] \"" in line[b:]:
        return 1
    return 0


def _url_ok(u: str) -> bool:
    return u.startswith("/") or "://" in u


def _plain(line: str) -> Dict[str, Any]:
    head, *hdrs = line.split("\t")
    method, sp, rest = head.partition(" ")
    if not sp or not method:
        raise _Bad("expected METHOD URL")
    if len(method) >= 32:
        raise _Bad("method too long")
    url, _, after = rest.lstrip(" ").partition(" ")
    after = after.lstrip(" ")
    # only an HTTP version may follow the URL: a header written after a
    # space (not a tab) was dropped
    if after and (not after.startswith("HTTP/") or " " in after):
        raise _Bad("text after the URL (a header goes after a tab)")
    if not _url_ok(url):
        raise _Bad("URL must be /path[?query] or scheme://host/path")
    headers = []
    for h in hdrs:
        if not h:
            break
        name, colon, value = h.partition(":")
        if not colon or not name:
            raise _Bad("a header must look like 'Name: value'")
        if len(headers) == 32:
            raise _Bad("too many headers")
        headers.append((name, value.lstrip(" ")))
    return {"method": method, "url": url, "headers": headers}


def _nginx(line: str) -> Optional[Dict[str, Any]]:
    remote = line.split(" ", 1)[0]
    q = line.find("] \"")
    if q < 0:
        raise _Bad("expected [time] \"request\" (nginx's combined format)")
    req_start = q + 3
    end = line.find('"', req_start)
    if end < 0:
        raise _Bad("the request is not closed by '\"'")
    parts = line[req_start:end].split(" ")
    if len(parts) < 2 or not _url_ok(parts[1]) or not parts[0] or \
            len(parts[0]) >= 32:
        return None  # no METHOD URI: skipped
    headers = []
    # the quoted field after the referer: User-Agent (nginx's stock "main"
    # format has "$http_x_forwarded_for" after it)
    quoted = line[end + 1:].split('"')
    if len(quoted) >= 5 and quoted[3] != "-":
        headers.append(("User-Agent", quoted[3]))
    return {"method": parts[0], "url": parts[1], "headers": headers,
            "remote": remote if len(remote) < 63 else ""}


def _json_line(line: str) -> Optional[Dict[str, Any]]:
    try:
        o = json.loads(line)
    except ValueError:
        raise _Bad("not a JSON object") from None
    if not isinstance(o, dict):
        raise _Bad("not a JSON object")
    m, p = o.get("method"), o.get("path")
    if "method" in o and "path" in o and m is None and p is None:
        return None  # refused before its head was read: skipped
    if isinstance(m, str) and ("path" in o and p is None or p == "*"):
        return None  # CONNECT (path null) or OPTIONS *: not routed, skipped
    if not isinstance(m, str) or not isinstance(p, str) or \
            not p.startswith("/"):
        raise _Bad("needs \"method\" and \"path\" (a string starting "
                   "with '/')")
    if len(m) >= 32:
        raise _Bad("method too long")
    q = o.get("query") if isinstance(o.get("query"), str) else ""
    host = o.get("host") if isinstance(o.get("host"), str) else ""
    # the gateway matched Host routes without the port it logs (its
    # strip_host_port): cut as the library cuts it, [v6]:port too
    start = (host.find("]") % (len(host) + 1)) if host.startswith("[") else 0
    colon = host.rfind(":", start)
    if colon >= 0:
        host = host[:colon]
    remote = o.get("remote_addr")
    return {"method": m, "url": p + ("?" + q if q else ""), "headers": [],
            "host": host, "remote": remote if isinstance(remote, str) else ""}


def _outcome(snap: Any, req: Any) -> Tuple[Optional[str], Optional[str], str]:
    m = snap.match(req)
    if m is None:
        return None, None, ""
    route = snap.get(m.route_id)
    uri = route.uri if route else None
    inst = ""
    if route is not None and uri and uri.startswith("lb:"):
        try:
            sel = snap.select(req)
            inst = sel.id if sel else ""
        except SwitchyardError:
            inst = ""
    return m.route_id, uri, inst


def replay(argv: List[str], out: TextIO, err: TextIO, *, read: Any,
           router_for: Any, build_request: Any) -> int:
    as_json = False
    requests = instances = None
    files: List[str] = []
    i = 0
    while i < len(argv):
        s = argv[i]
        if s in ("-h", "--help"):
            out.write(HELP)
            return 0
        if (s == "--requests" and requests) or \
                (s == "--instances" and instances):
            # one value is used: the first was dropped
            err.write(f"switchyard diff: {s} given twice\n")
            return 2
        if s == "--json":
            as_json = True
        elif s == "--requests" and i + 1 < len(argv):
            i += 1
            requests = argv[i]
        elif s == "--instances" and i + 1 < len(argv):
            i += 1
            instances = argv[i]
        elif len(files) < 2 and not s.startswith("-"):
            files.append(s)
        else:
            files = files + ["", ""]
        i += 1
    if len(files) != 2 or not requests:
        err.write("usage: switchyard diff --requests FILE [--json] "
                  "[--instances FILE] OLD NEW\n")
        return 2
    routers = []
    try:
        for f in files:
            r = router_for(f, instances, err)
            if r is None:
                return 2
            routers.append(r)
        try:
            text = read(requests).decode("utf-8", "replace")
        except OSError as exc:
            err.write(f"switchyard diff: cannot read {requests}: "
                      f"{exc.strerror or exc}\n")
            return 2
        snaps = [r.acquire() for r in routers]
        try:
            return _run(text, requests, snaps, as_json, out, err,
                        build_request)
        finally:
            for s in snaps:
                s.release()
    finally:
        for r in routers:
            r.close()


def _run(text: str, file: str, snaps: List[Any], as_json: bool, out: TextIO,
         err: TextIO, build_request: Any) -> int:
    fmt = -1
    n = skipped = first_skip = 0
    changed: List[Dict[str, Any]] = []
    pairs: List[List[Any]] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for lineno, line in enumerate(lines, 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line or line.startswith("#"):
            continue
        if fmt < 0:
            fmt = _detect(line)
        try:
            q = (_plain, _nginx, _json_line)[fmt](line)
        except _Bad as exc:
            err.write(f"{file}:{lineno}: {exc} (read as {_FORMATS[fmt]} "
                      "lines)\n")
            return 2
        if q is None:
            skipped += 1
            first_skip = first_skip or lineno
            continue
        req = build_request(q, 0x9e3779b97f4a7c15 * (lineno + 1)
                            % (1 << 64))
        a, b = _outcome(snaps[0], req), _outcome(snaps[1], req)
        n += 1
        if a == b:
            continue
        for p in pairs:
            if p[0] == a[0] and p[1] == b[0]:
                p[2] += 1
                break
        else:
            pairs.append([a[0], b[0], 1])
        changed.append({"method": q["method"], "url": q["url"],
                        "line": lineno, "old_route": a[0],
                        "new_route": b[0], "old_upstream": a[1],
                        "new_upstream": b[1], "old_instance": a[2] or None,
                        "new_instance": b[2] or None})
        if not as_json:
            s = (f"{q['method']} {q['url']}: {a[0] or '(no route)'} -> "
                 f"{b[0] or '(no route)'}")
            if a[0] and b[0] and a[1] != b[1]:
                s += f" [upstream {a[1]} -> {b[1]}]"
            if a[2] != b[2]:
                s += f" [instance {a[2] or 'none'} -> {b[2] or 'none'}]"
            out.write(s + "\n")
    if skipped:
        err.write(f"{file}: {skipped} line{'' if skipped == 1 else 's'} "
                  f"without a request skipped (first: line {first_skip})\n")
    if as_json:
        out.write(json.dumps({"requests": n, "changed": changed, "summary": [
            {"old_route": p[0], "new_route": p[1], "count": p[2]}
            for p in pairs]}, separators=(",", ":"), ensure_ascii=False)
            + "\n")
        return 0
    out.write(f"{len(changed)} of {n} request{'' if n == 1 else 's'} "
              f"re-routed{':' if pairs else ''}\n")
    for p in pairs:
        out.write(f"  {p[2]:6d}  {p[0] or '(no route)'} -> "
                  f"{p[1] or '(no route)'}\n")
    return 0
