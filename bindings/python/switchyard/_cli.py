"""The command-line tool, mirroring the C ``switchyard`` program
(examples/cli/switchyard.c and examples/cli/cli_route.c): same arguments, same
output lines, same JSON shapes, same exit statuses.

    python3 -m switchyard --version
    python3 -m switchyard check [--quiet] FILE...
    python3 -m switchyard match [--json] [--strict] [-H 'Name: value']... [--remote-addr IP]
        [--now ISO8601|EPOCH_MS] [--seed N] [--instances FILE] FILE... METHOD URL
    python3 -m switchyard explain [same options as match] FILE... METHOD URL
    python3 -m switchyard diff [--json] OLD NEW

``convert`` (Spring Boot YAML and .properties to a route document) is a
command of the C tool only, which reads YAML with libyaml: here it is
refused with a message that says so, never half done.

Exit status: 0 ok (match/explain: a route matched; match: and an lb://
route has an instance), 1 an invalid document (check), no route matched or
no instance can be chosen (match), 2 usage errors, unreadable files,
documents that do not load, a malformed method or URL. match and explain
skip invalid routes (reported on stderr) unless --strict. All the routing
logic is the library's.
"""
from __future__ import annotations

import ipaddress
import json
import sys
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from ._core import Registry, diff, parse, parse_instances
from ._replay import replay
from ._errors import InvalidDocumentError, SwitchyardError
from ._policy import host_profile, host_runs_all
from ._router import Router
from ._native import ffi, lib
from ._convert import check as _check_rc, new_error
from ._types import Action, Changed, Issue, Request, UpstreamKind

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

COMMANDS = (("check", "validate route documents"),
            ("match", "find the route a request would take"),
            ("explain", "show why each route matches or not"),
            ("diff", "compare two route documents"))

_OP_NAMES = {0: "add", 1: "add-if-absent", 2: "set", 3: "remove",
             4: "dedupe", 5: "rewrite", 6: "rewrite-location"}


class _Usage(Exception):
    pass


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def _where(file: str, line: int, column: int, path: str, message: str,
           dollar: bool = False) -> str:
    if line:
        return f"{file}: line {line}, column {column}: {message}"
    if path or dollar:
        return f"{file}: {path or '$'}: {message}"
    return f"{file}: {message}"


def _exc_line(file: str, e: SwitchyardError, dollar: bool = False) -> str:
    return _where(file, e.line, e.column, e.path, e.message, dollar)


def _issue_line(file: str, i: Issue) -> str:
    return _where(file, i.line, i.column, i.path, i.message)


# ------------------------------------------------------------------------
# check
# ------------------------------------------------------------------------

_CHECK_USAGE = (
    "usage: switchyard check [--quiet] [--fail-on-warning] "
    "[--host gateway|nginx] FILE...\n"
    'Validate route documents (a JSON array of routes or {"version", "routes"}).\n'
    "Prints one line per error, every error of every route: FILE: PATH: message.\n"
    "Warns of each route no request can reach: shadowed by routes ranked above\n"
    "it (they take every request it matches) or matching nothing at all:\n"
    "FILE: PATH: warning: route 'x' is shadowed by 'y' (PATH): ...\n"
    "Lists what the host must run (rate limiters, breakers, retries, "
    "forward:, ...):\n"
    "FILE: host-run [NAME]: 'a', 'b'   (the routes using it)\n"
    "\n"
    "options:\n"
    "  -q, --quiet          print nothing for valid files\n"
    "  --fail-on-warning    exit 1 when any warning is printed\n"
    "  --host NAME          refuse what host NAME does not run (gateway: the\n"
    "                       mini-gateway, nginx: the nginx module)\n"
    "  -h, --help           show this help\n"
    "FILE may be - for standard input.\n"
    "\n"
    "exit status: 0 every file is valid (warnings or not), 1 any is not (or\n"
    "warned, with --fail-on-warning), 2 usage errors or unreadable files.\n"
    "\n"
    "example:\n"
    "  switchyard check routes.json other-routes.json\n")


def _shadow_line(file: str, s: Any) -> str:
    if not s.shadowed_by:
        return (f"{file}: {s.path}: warning: route '{s.route_id}' is "
                f"unreachable: {s.reason}")
    names = [f"'{b}' ({p})" for b, p in zip(s.shadowed_by,
                                            s.shadowed_by_paths)]
    by = names[0] if len(names) == 1 else (", ".join(names[:-1]) + " and "
                                           + names[-1])
    return (f"{file}: {s.path}: warning: route '{s.route_id}' is shadowed "
            f"by {by}: {s.reason}")


def _host_run_lines(file: str, doc: Any) -> List[str]:
    """FILE: host-run [NAME]: 'a', 'b' for each host-run item in use, in
    the library's order (the C tool's print_host_runs)."""
    lines = []
    for item in host_runs_all():
        ids = [r.id for r in doc.routes if item in r.host_runs]
        if ids:
            lines.append(f"{file}: host-run [{item}]: "
                         + ", ".join(f"'{i}'" for i in ids))
    return lines


def _host_registry(host: str) -> Registry:
    """The filters the mini-gateway runs itself (SecureHeaders, ...),
    registered by its own host_filters.c, as the C tool does: run for
    gateway, refused naming the host for another."""
    reg = Registry()
    e = new_error()
    if host == "gateway":
        _check_rc(lib.gw_host_filters_register(reg._ptr, e), e)
    else:
        name = ffi.new("char[]", host.encode())
        reg._host_name = name  # the registry keeps a pointer to it
        _check_rc(lib.gw_host_filters_refuse(reg._ptr, name, e), e)
    return reg


def _gateway_cors_lines(file: str, doc: Any, envelope: bool,
                        dropped: bool) -> List[str]:
    """--host gateway: each route's cors metadata read by the gateway's own
    cors_parse.c, one line per route the gateway would refuse at apply (the
    C tool's check_gateway_cors: paths index the document's routes when
    none was dropped, else name the route by id)."""
    lines = []
    p = doc._p()
    for i in range(lib.sy_document_route_count(p)):
        r = lib.sy_document_route(p, i)
        v = lib.sy_route_metadata(r, b"cors")
        if v == ffi.NULL:
            continue
        msg = ffi.new("char[256]")
        c = lib.gw_cors_parse(v, msg, 256)
        if c != ffi.NULL:
            lib.gw_cors_free(c)
            continue
        if dropped:
            rid = ffi.string(lib.sy_route_id(r))[:100].decode(
                "utf-8", "replace")
            path = f"route '{rid}'.metadata.cors"
        else:
            path = f"{'routes' if envelope else ''}[{i}].metadata.cors"
        why = ffi.string(msg).decode("utf-8", "replace") or "out of memory"
        lines.append(_where(file, 0, 0, path, f"cors: {why}"))
    return lines


def _check(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    quiet = False
    fail_on_warning = False
    host = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a in ("-h", "--help"):
            out.write(_CHECK_USAGE)
            return EXIT_OK
        if a in ("-q", "--quiet"):
            quiet = True
            i += 1
            continue
        if a == "--fail-on-warning":
            fail_on_warning = True
            i += 1
            continue
        if a == "--host" and host is not None:
            # one host is checked for: the first was dropped
            err.write("switchyard check: --host given twice\n")
            err.write(_CHECK_USAGE)
            return EXIT_USAGE
        if a == "--host":
            host = argv[i + 1] if i + 1 < len(argv) else None
            if host is None or host_profile(host) is None:
                err.write("switchyard check: --host takes gateway or nginx\n")
                err.write(_CHECK_USAGE)
                return EXIT_USAGE
            i += 2
            continue
        if a.startswith("-") and len(a) > 1:
            err.write(f"switchyard check: unknown option '{a}'\n")
            err.write(_CHECK_USAGE)
            return EXIT_USAGE
        break
    files = argv[i:]
    if not files:
        err.write("switchyard check: no file given\n")
        err.write(_CHECK_USAGE)
        return EXIT_USAGE
    status = EXIT_OK
    for file in files:
        try:
            raw = _read(file)
        except OSError as exc:
            err.write(f"switchyard check: {file}: {exc.strerror or exc}\n")
            status = EXIT_USAGE
            continue
        try:
            doc = parse(raw, lenient=True,  # list every bad route
                        host_runs=host,
                        registry=_host_registry(host) if host
                        else None)
        except SwitchyardError as exc:
            out.write(_exc_line(file, exc) + "\n")
            status = status or EXIT_FAIL
            continue
        with doc:
            issues = doc.issues
            for issue in issues:
                out.write(_issue_line(file, issue) + "\n")
            if host == "gateway":
                envelope = raw.lstrip(b" \t\r\n").startswith(b"{")
                cors = _gateway_cors_lines(file, doc, envelope, bool(issues))
                for line in cors:
                    out.write(line + "\n")
                issues = tuple(issues) + tuple(cors)
            if issues:
                status = status or EXIT_FAIL
            warnings = doc.shadowed()
            for w in warnings:
                out.write(_shadow_line(file, w) + "\n")
            if warnings and fail_on_warning:
                status = status or EXIT_FAIL
            if not issues and not quiet:
                n = len(doc)
                out.write(f"{file}: ok, {n} route{'' if n == 1 else 's'}\n")
            if not quiet:
                for line in _host_run_lines(file, doc):
                    out.write(line + "\n")
    return status


# ------------------------------------------------------------------------
# match and explain
# ------------------------------------------------------------------------

class _Help(Exception):
    pass


class _RequestArgs:
    def __init__(self) -> None:
        self.json = False
        self.strict = False
        self.files: List[str] = []
        self.headers: List[Tuple[str, str]] = []
        self.remote_addr: Optional[str] = None
        self.now: Optional[str] = None
        self.instances: Optional[str] = None
        self.seed = 0
        self.method = ""
        self.url = ""


def _request_usage(cmd: str) -> str:
    return (f"usage: switchyard {cmd} [--json] [--strict] [-H 'Name: value']... "
            "[--remote-addr IP] [--now ISO8601|EPOCH_MS] [--seed N] "
            "[--instances FILE] FILE... METHOD URL\n")


def _request_help(cmd: str) -> str:
    """`match --help` / `explain --help`, as the C tool prints it."""
    text = _request_usage(cmd)
    if cmd == "match":
        text += ("Find the route a request takes, the instance an lb:// "
                 "route sends it to,\nand the upstream request after "
                 "filters.\n")
    else:
        text += ("List every route in rank order: whether it matches the "
                 "request and, if\nnot, the first predicate that does not "
                 "hold.\n")
    text += (
        "\n"
        "options:\n"
        "  --json               print one JSON object instead of text\n"
        "  --strict             fail (exit 2) on any invalid route; by "
        "default invalid\n"
        "                       routes are reported on stderr, as check "
        "lists them,\n"
        "                       and skipped\n"
        "  -H 'Name: value'     a request header (repeatable); Host "
        "defaults to the\n"
        "                       URL's authority\n"
        "  --remote-addr IP     client address for RemoteAddr (default "
        "127.0.0.1)\n"
        "  --now TIME           ISO-8601 (2024-01-02T03:04:05Z) or epoch "
        "milliseconds,\n"
        "                       for After, Before and Between\n"
        "  --seed N             seed for Weight draws and random "
        "balancing\n"
        "  --instances FILE     service instances for lb:// routes "
        "(format:\n"
        "                       docs/route-definitions.md, \"Instances "
        "documents\")\n"
        "  -h, --help           show this help\n"
        "An option that takes a value, other than -H, is given at most "
        "once.\n"
        "FILE... are route documents, one source each, in precedence "
        "order.\n"
        "METHOD is an HTTP method token, case-sensitive (GET, POST, ...;\n"
        "not get); URL is "
        "http://host[:port]/path[?query] or /path[?query], "
        "percent-encoded.\n"
        "\n")
    if cmd == "match":
        text += ("exit status: 0 a route matches (and, for an lb:// route, "
                 "an instance\ncan be chosen), 1 no route matches or no "
                 "instance can be chosen (the\ngateway answers 404 or 503), "
                 "2 usage errors, unreadable or invalid\ninput.\n"
                 "\n"
                 "examples:\n"
                 "  switchyard match routes.json GET "
                 "'http://shop.example.com/api/orders/42?x=1'\n"
                 "  switchyard match --json -H 'version: 2.0' --instances "
                 "instances.json \\\n"
                 "      routes.json GET http://shop.example.com/api/orders/42\n")
    else:
        text += ("exit status: 0 a route matches, 1 none does, 2 usage "
                 "errors, unreadable\nor invalid input.\n"
                 "\n"
                 "example:\n"
                 "  switchyard explain -H 'Authorization: Bearer x' "
                 "routes.json POST /api/orders/42\n")
    return text


_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789"
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SCHEME = frozenset("+-.0123456789"
                    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _check_method(m: str) -> None:
    if not m or any(c not in _TCHAR for c in m):
        raise _Usage(f"method '{m}' is not an HTTP method token (letters, "
                     "digits and !#$%&'*+-.^_`|~, e.g. GET)")
    # case-sensitive (RFC 9110 9.1): 'get' is no Method=GET route's, and
    # the gateway answers it 400 (valid_method() in examples/cli/cli_route.c)
    if any("a" <= c <= "z" for c in m):
        up = "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in m)
        raise _Usage(f"METHOD '{m}' has lower-case letters: HTTP methods are "
                     f"case-sensitive (RFC 9110 9.1), '{m}' is not '{up}' "
                     "(the gateway answers it 400)")


def _check_url(url: str) -> None:
    """The same rules as valid_url() in examples/cli/cli_route.c."""
    raw = url.encode("utf-8", "surrogateescape")
    for i, b in enumerate(raw):
        if b <= 0x20 or b == 0x7F:
            raise _Usage(f"URL '{url}' has a space or control character at "
                         f"offset {i} (percent-encode it)")
    if "#" in url:
        raise _Usage(f"URL '{url}' has a fragment ('#'), which is never "
                     "sent to a server")
    if url.startswith("/"):
        return
    scheme, sep, rest = url.partition("://")
    if (not sep or not scheme or not scheme[0].isascii()
            or not scheme[0].isalpha() or any(c not in _SCHEME
                                              for c in scheme)):
        raise _Usage(f"URL '{url}' is neither /path[?query] nor "
                     "scheme://host[:port]/path[?query]")
    cut = min((rest.find(c) for c in "/?" if c in rest), default=len(rest))
    host = rest[:cut]
    colon = -1
    if host.startswith("["):
        close = host.find("]")
        if close <= 1:
            raise _Usage(f"URL '{url}' has an unclosed IPv6 address")
        if close + 1 < len(host):
            if host[close + 1] != ":":
                raise _Usage(f"URL '{url}': unexpected text after ']'")
            colon = close + 1
    else:
        colon = host.find(":")
    if not host or colon == 0:
        raise _Usage(f"URL '{url}' has no host after '://'")
    if colon >= 0:
        port = host[colon + 1:]
        ok = (1 <= len(port) <= 5 and all("0" <= c <= "9" for c in port)
              and 0 < int(port) <= 65535)
        if not ok:
            raise _Usage(f"URL '{url}' has a bad port '{port}' (1 to 65535)")


def _valid_client_addr(s: str) -> bool:
    """What the RemoteAddr predicate reads as a client (as the C tool):
    an IPv4 or IPv6 address, with a port after it or not, or an IPv6
    address in brackets."""
    def ip(text: str, version: int) -> bool:
        try:
            return ipaddress.ip_address(text).version == version \
                and "%" not in text
        except ValueError:
            return False
    if ip(s, 4) or ip(s, 6):
        return True
    if s.startswith("[") and s.endswith("]"):
        return ip(s[1:-1], 6)  # "[::1]": the library reads it as ::1
    if s.startswith("["):
        addr, rb, port = s[1:].partition("]:")
        ok = bool(rb) and ip(addr, 6)
    else:
        addr, colon, port = s.partition(":")
        ok = bool(colon) and ":" not in port and ip(addr, 4)
    return ok and 0 < len(port) <= 5 and port.isdigit() \
        and port.isascii() and int(port) <= 65535


def _parse_request_args(cmd: str, argv: Sequence[str]) -> _RequestArgs:
    a = _RequestArgs()
    pos: List[str] = []
    given = set()
    i = 0
    while i < len(argv):
        s = argv[i]
        has_next = i + 1 < len(argv)
        if s in ("-h", "--help"):
            raise _Help()
        if s in ("--remote-addr", "--now", "--instances", "--seed"):
            if s in given:
                raise _Usage(f"{s} given twice")  # a value would be dropped
            if has_next:
                given.add(s)
        if s == "--json":
            a.json = True
        elif s == "--strict":
            a.strict = True
        elif s == "-H" and has_next:
            i += 1
            name, colon, value = argv[i].partition(":")
            if not colon or not name:
                raise _Usage("a header must look like 'Name: value'")
            a.headers.append((name, value.lstrip(" \t")))
        elif s == "--remote-addr" and has_next:
            i += 1
            a.remote_addr = argv[i]
            if not _valid_client_addr(a.remote_addr):
                raise _Usage("--remote-addr takes an IP address (10.0.0.1, "
                             "::1, [::1], 10.0.0.1:5000 or [::1]:5000)")
        elif s == "--now" and has_next:
            i += 1
            a.now = argv[i]
        elif s == "--instances" and has_next:
            i += 1
            a.instances = argv[i]
        elif s == "--seed" and has_next:
            i += 1
            if not (argv[i].isascii() and argv[i].isdigit()) \
                    or int(argv[i]) >= 1 << 64:
                raise _Usage("--seed takes a non-negative integer")
            a.seed = int(argv[i])
            if a.seed == 0:  # the library reads seed 0 as not given
                raise _Usage("--seed 0 reads as no seed (the draws are random): give 1 or more")
        elif s.startswith("--"):
            raise _Usage("unknown option or missing value")
        else:
            pos.append(s)
        i += 1
    if len(pos) < 3:
        raise _Usage("needs FILE... METHOD URL")
    a.files, a.method, a.url = pos[:-2], pos[-2], pos[-1]
    _check_method(a.method)
    _check_url(a.url)
    return a


_C_SPACE = " \t\n\v\f\r"
_NOW_ZERO = ("--now 0 (1970-01-01T00:00:00Z) reads as not given (the time "
             "now): give another time, or no --now")
_DIGITS = "0123456789"


def _scan_int(text: str, i: int, width: int) -> Tuple[Optional[int], int]:
    """sscanf's %<width>d at text[i:]: blanks skipped, then a sign and
    ASCII digits, width counting the sign; (None, i) when no digit."""
    while i < len(text) and text[i] in _C_SPACE:
        i += 1
    j = i
    if j < len(text) and text[j] in "+-":
        j += 1
    k = j
    while k < len(text) and k - i < width and text[k] in _DIGITS:
        k += 1
    if k == j:
        return None, i
    return int(text[i:k]), k


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _parse_now(text: str) -> int:
    """ISO-8601 (2024-01-02T03:04:05[.678](Z|+01:00)) or epoch ms, parsed by
    the C tool's rules (strtoll, then sscanf and timegm): what it refuses
    is refused, as int() and datetime.fromisoformat would take 1_000,
    "5 ", 2024-01-02, a space for T or +0100."""
    bad = _Usage("--now takes ISO-8601 (2024-01-02T03:04:05Z) "
                 "or epoch milliseconds")
    if text == "":
        return 0  # strtoll: no digits, nothing left (refused as epoch 0)
    i = 0
    while i < len(text) and text[i] in _C_SPACE:
        i += 1
    digits = text[i + (text[i:i + 1] in ("+", "-")):]
    if digits and all(c in _DIGITS for c in digits):
        ms = int(text[i:])
        if -(1 << 63) <= ms < 1 << 63:
            return ms
    fields = []
    i = 0
    for width, after in ((4, "-"), (2, "-"), (2, "T"), (2, ":"), (2, ":"),
                         (2, "")):
        value, i = _scan_int(text, i, width)
        if value is None:
            raise bad
        fields.append(value)
        if after:
            if text[i:i + 1] != after:
                raise bad
            i += 1
    year, mon, day, hour, minute, sec = fields
    frac = 0
    if text[i:i + 1] == ".":
        i += 1
        start = i
        while i < len(text) and text[i] in _DIGITS:
            i += 1
        frac = int((text[start:i] + "000")[:3])
    rest = text[i:]
    offset = 0
    if rest[:1] in ("+", "-"):
        o = rest[1:]
        if not (len(o) == 5 and o[2] == ":" and all(
                c in _DIGITS for c in o[:2] + o[3:])):
            raise bad
        hh, mm = int(o[:2]), int(o[3:])
        if hh > 23 or mm > 59:
            raise bad
        offset = (hh * 60 + mm) * 60 * (-1 if rest[0] == "-" else 1)
    elif rest not in ("Z", ""):
        raise bad  # text after the time
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    mdays = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    # timegm would carry a field out of its range into the next one
    if not (1 <= mon <= 12 and 1 <= day <= mdays[mon - 1] and
            0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= sec <= 59):
        raise bad
    t = (_days_from_civil(year, mon, day) * 86400 + hour * 3600 +
         minute * 60 + sec)
    return (t - offset) * 1000 + frac


def _split_url(url: str) -> Tuple[str, str, str, str]:
    """(scheme, host, path, query) the way the C tool splits a URL."""
    scheme = host = ""
    rest = url
    if "://" in url:
        scheme, _, rest = url.partition("://")
        cut = min((rest.find(c) for c in "/?" if c in rest),
                  default=len(rest))
        host, rest = rest[:cut], rest[cut:]
    path, _, query = rest.partition("?")
    return scheme, host, path or "/", query


def _build_request(a: _RequestArgs) -> Request:
    scheme, host, path, query = _split_url(a.url)
    headers = list(a.headers)
    host_headers = [v for n, v in headers if n.lower() == "host"]
    if host_headers:
        host = host_headers[-1]
    elif host:
        headers.append(("Host", host))
    content_length = None
    for n, v in headers:
        if n.lower() == "content-length":
            # digits only, as the gateway reads it (it answers 400 to
            # anything else); "abc" was read as 0
            num = v.rstrip(" \t")
            if not (num.isascii() and num.isdigit()) or int(num) >= 1 << 63:
                raise _Usage("a Content-Length header takes a number of "
                             "bytes")
            content_length = int(num)
    now = None if a.now is None else _parse_now(a.now)
    if now == 0:
        raise _Usage(_NOW_ZERO)
    return Request(method=a.method, scheme=scheme, host=host, path=path,
                   query=query, headers=tuple(headers),
                   remote_addr=a.remote_addr or "127.0.0.1", now=now,
                   seed=a.seed, content_length=content_length)


def _load_instances(router: Router, path: str, err: TextIO) -> int:
    """An instances document, parsed and checked by the library
    (sy_instances_parse), then one set_instances per service."""
    try:
        raw = _read(path)
    except OSError as exc:
        err.write(f"switchyard: cannot read {path}: {exc.strerror or exc}\n")
        return EXIT_USAGE
    try:
        services = parse_instances(raw)
    except SwitchyardError as exc:
        err.write(_exc_line(path, exc, dollar=True) + "\n")
        return EXIT_USAGE
    for name, instances in services.items():
        try:
            router.set_instances(name, instances)
        except SwitchyardError as exc:
            err.write(f"{path}: services.{name}: {exc.message}\n")
            return EXIT_USAGE
    return EXIT_OK


def _load_router(cmd: str, a: _RequestArgs, err: TextIO
                 ) -> Tuple[int, Optional[Router]]:
    # Documents load as `check` reads them: an invalid route is reported on
    # stderr and skipped; --strict makes it fail the run.
    router = Router(lenient=not a.strict)
    for file in a.files:
        try:
            raw = _read(file)
        except OSError as exc:
            err.write(f"switchyard {cmd}: cannot read {file}: "
                      f"{exc.strerror or exc}\n")
            router.close()
            return EXIT_USAGE, None
        try:
            router.add_source(file)
            report = router.apply(file, raw)
            issues = report.issues
        except InvalidDocumentError as exc:
            if a.strict or exc.report is None:
                err.write(_exc_line(file, exc, dollar=True) + "\n")
                router.close()
                return EXIT_USAGE, None
            issues = exc.report.issues
        except SwitchyardError as exc:
            err.write(_exc_line(file, exc, dollar=True) + "\n")
            router.close()
            return EXIT_USAGE, None
        for i in issues:
            err.write(_where(file, i.line, i.column, i.path, i.message,
                             True) + " (route skipped)\n")
    if a.instances:
        rc = _load_instances(router, a.instances, err)
        if rc:
            router.close()
            return rc, None
    return EXIT_OK, router


def _match(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    a = _parse_request_args("match", argv)
    rc, router = _load_router("match", a, err)
    if router is None:
        return rc
    req = _build_request(a)
    with router, router.acquire() as snap:
        m = snap.match(req)
        route = snap.get(m.route_id) if m is not None else None
        sel = None
        why: Optional[str] = None
        if m is not None and m.upstream.kind == UpstreamKind.SERVICE:
            try:
                sel = snap.select(req)
            except SwitchyardError as exc:
                why = exc.message
    if a.json:
        if m is None or route is None:
            out.write(_dumps({"route": None}) + "\n")
            return EXIT_FAIL
        o: Dict[str, Any] = {
            "route": m.route_id,
            "vars": dict(m.vars),
            "path": m.path,
            "query": m.query,
            "headers": [[n, v] for n, v in m.headers],
            "response_headers": [[_OP_NAMES.get(int(op.kind), "?"), op.name,
                                  op.value] for op in m.response_ops],
            "status": m.status or None,
            "redirect": m.redirect,
            "upstream": route.uri,
            "filters": [{"name": f.name, "args": dict(f.args)}
                        for f in m.host_filters],
        }
        if sel is not None:
            o["instance"] = {"id": sel.id, "host": sel.host,
                             "port": sel.port, "scheme": sel.scheme}
        else:
            o["instance"] = None
            if why is not None:
                o["instance_error"] = why
        out.write(_dumps(o) + "\n")
        return EXIT_FAIL if why is not None else EXIT_OK
    if m is None or route is None:
        out.write(f"no route matches {a.method} {a.url} "
                  "(the gateway answers 404)\n")
        return EXIT_FAIL
    out.write(f"route:    {m.route_id} (order {route.order})\n")
    for name, value in m.vars.items():
        out.write(f"var:      {name} = {value}\n")
    out.write(f"upstream: {route.uri}\n")
    if sel is not None:
        out.write(f"instance: {sel.id} {sel.scheme}://{sel.host}:{sel.port}\n")
    elif why is not None:
        out.write(f"instance: none ({why}; the gateway answers 503)\n")
    if m.action == Action.REDIRECT:
        out.write(f"answer:   {m.status} redirect to {m.redirect or ''}\n")
    elif m.action == Action.RESPOND:
        out.write(f"answer:   {m.status} without calling upstream\n")
    out.write(f"request:  {a.method} {m.path}"
              f"{'?' if m.query else ''}{m.query}\n")
    for name, value in m.headers:
        out.write(f"  header: {name}: {value}\n")
    if m.action == Action.PROXY and m.status:
        out.write(f"status:   {m.status}\n")
    for op in m.response_ops:
        out.write(f"response: {_OP_NAMES.get(int(op.kind), '?')} {op.name}"
                  f"{': ' if op.value else ''}{op.value}\n")
    for f in m.host_filters:
        out.write(f"filter:   {f.name} (run by the host)\n")
    # an lb:// route without an instance is a 503, not a success
    return EXIT_FAIL if why is not None else EXIT_OK


def _explain(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    a = _parse_request_args("explain", argv)
    rc, router = _load_router("explain", a, err)
    if router is None:
        return rc
    req = _build_request(a)
    with router, router.acquire() as snap:
        steps = snap.explain(req)
        orders = {r.id: r.order for r in snap}
        m = snap.match(req)
    winner = m.route_id if m is not None else None
    if a.json:
        routes = []
        for s in steps:
            e: Dict[str, Any] = {"route": s.route_id,
                                 "order": orders.get(s.route_id, 0),
                                 "matched": s.matched}
            if not s.matched:
                if s.failed_predicate is not None and s.failed_predicate >= 0:
                    e["failed_predicate"] = s.failed_predicate
                e["failed"] = s.failed_name
            routes.append(e)
        out.write(_dumps({"route": winner, "routes": routes}) + "\n")
    else:
        for rank, s in enumerate(steps, 1):
            order = orders.get(s.route_id, 0)
            head = f"{rank:3d}. {s.route_id:<24} order {order:<6d} "
            if s.matched:
                out.write(head + "MATCH\n")
            elif s.failed_predicate is None or s.failed_predicate < 0:
                out.write(head + f"skipped: {s.failed_name}\n")
            else:
                out.write(head + f"predicates[{s.failed_predicate}] "
                          f"{s.failed_name} does not hold\n")
        out.write(f"=> {winner if winner else 'no route (404)'}\n")
    return EXIT_OK if winner else EXIT_FAIL


# ------------------------------------------------------------------------
# diff
# ------------------------------------------------------------------------

_DIFF_HELP = (
    "usage: switchyard diff [--json] OLD NEW\n"
    "Compare two route documents by route id and meaning: routes added, "
    "removed,\nupdated (with the parts that changed: predicates, filters, "
    "uri, metadata,\norder), reordered (kept routes whose rank moved past "
    "another: another\nroute now matches first; not an update) and the "
    "number unchanged. Both\ndocuments must be valid (strict).\n"
    "\n"
    "options:\n"
    "  --json       print one JSON object: added, removed, updated, "
    "reordered,\n               unchanged\n"
    "  --requests FILE  replay recorded requests through both instead "
    "(see\n"
    "               switchyard diff --requests - --help)\n"
    "  -h, --help   show this help\n"
    "\n"
    "exit status: 0 the diff was printed (changes or not), 2 usage errors, "
    "unreadable\nor invalid documents.\n"
    "\n"
    "example:\n"
    "  switchyard diff routes-v1.json routes-v2.json\n")


def _replay_router(file: str, instances: Optional[str],
                   err: TextIO) -> Optional[Router]:
    """One side of diff --requests: the document as source "routes"
    (strict), the instances for lb:// routes; None after an error."""
    try:
        raw = _read(file)
    except OSError as exc:
        err.write(f"switchyard diff: cannot read {file}: "
                  f"{exc.strerror or exc}\n")
        return None
    router = Router()
    try:
        router.add_source("routes")
        router.apply("routes", raw)
    except SwitchyardError as exc:
        err.write(_exc_line(file, exc, dollar=True) + "\n")
        router.close()
        return None
    if instances and _load_instances(router, instances, err):
        router.close()
        return None
    return router


def _replay_request(q: Dict[str, Any], seed: int) -> Request:
    """A replayed request as cli_replay.c builds it: the URL split, the
    Host header (else the log's host) as the host, no Host added."""
    scheme, host, path, query = _split_url(q["url"])
    host = q.get("host") or host
    for n, v in q["headers"]:
        if n.lower() == "host":
            host = v
    return Request(method=q["method"], scheme=scheme, host=host, path=path,
                   query=query, headers=tuple(q["headers"]),
                   remote_addr=q.get("remote") or "127.0.0.1", seed=seed)


def _diff(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    if "--requests" in argv:
        return replay(list(argv), out, err, read=_read,
                      router_for=_replay_router, build_request=_replay_request)
    as_json = False
    files: List[str] = []
    bad = False
    for s in argv:
        if s in ("-h", "--help"):
            out.write(_DIFF_HELP)
            return EXIT_OK
        if s == "--json":
            as_json = True
        elif len(files) < 2 and not s.startswith("-"):
            files.append(s)
        else:
            bad = True
    if bad or len(files) != 2:
        err.write("usage: switchyard diff [--json] OLD NEW\n")
        return EXIT_USAGE
    docs = []
    for file in files:
        try:
            raw = _read(file)
        except OSError as exc:
            err.write(f"switchyard diff: cannot read {file}: "
                      f"{exc.strerror or exc}\n")
            return EXIT_USAGE
        try:
            docs.append(parse(raw))
        except SwitchyardError as exc:
            err.write(_exc_line(file, exc, dollar=True) + "\n")
            return EXIT_USAGE
    try:
        d = diff(docs[0], docs[1])
    finally:
        for doc in docs:
            doc.close()
    if as_json:
        out.write(_dumps(d.to_dict()) + "\n")
        return EXIT_OK
    for rid in d.added:
        out.write(f"+ {rid}\n")
    for rid in d.removed:
        out.write(f"- {rid}\n")
    for rid, changed in d.updated:
        out.write(f"~ {rid} ({', '.join(Changed(changed).names())})\n")
    for rid in d.reordered:
        out.write(f"^ {rid} (reordered)\n")
    out.write(f"{d.unchanged} unchanged\n")
    return EXIT_OK


# ------------------------------------------------------------------------
# dispatch
# ------------------------------------------------------------------------

def _usage(out: TextIO) -> None:
    out.write("usage: switchyard COMMAND [ARGS...]\n"
              "       switchyard --version\n\ncommands:\n")
    for name, summary in COMMANDS:
        out.write(f"  {name:<8} {summary}\n")
    out.write("\nswitchyard COMMAND --help shows a command's options.\n")


def main(argv: Optional[Sequence[str]] = None, out: Optional[TextIO] = None,
         err: Optional[TextIO] = None) -> int:
    """Run the tool with ``argv`` (default: sys.argv[1:]); returns the exit
    status instead of exiting."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if not args:
        _usage(err)
        return EXIT_USAGE
    cmd, rest = args[0], args[1:]
    if cmd in ("--version", "-V"):
        out.write("switchyard %s\n" % ffi.string(lib.sy_version()).decode())
        return EXIT_OK
    if cmd in ("-h", "--help", "help"):
        _usage(out)
        return EXIT_OK
    try:
        if cmd == "check":
            return _check(rest, out, err)
        if cmd in ("match", "explain"):
            return (_match if cmd == "match" else _explain)(rest, out, err)
        if cmd == "diff":
            return _diff(rest, out, err)
        if cmd == "convert":
            err.write("switchyard convert: a command of the C switchyard tool "
                      "only (it reads YAML with libyaml): run "
                      "`switchyard convert FILE...`\n")
            return EXIT_USAGE
    except _Help:
        out.write(_request_help(cmd))
        return EXIT_OK
    except _Usage as exc:
        err.write(f"switchyard {cmd}: {exc}\n")
        err.write(_request_usage(cmd))
        return EXIT_USAGE
    except SwitchyardError as exc:
        err.write(f"switchyard {cmd}: {exc.message}\n")
        return EXIT_USAGE
    err.write(f"switchyard: unknown command '{cmd}'\n")
    _usage(err)
    return EXIT_USAGE


