"""C <-> Python conversion, per-thread match contexts and callback traps.

Nothing here outlives a C call: results are copied into the value types of
_types.py before the borrowed C memory can go away.
"""
from __future__ import annotations

import json
import logging
import math
import threading
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, Callable, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from . import _errors
from ._native import ffi, lib
from ._types import (Changed, Diff, HeadersLike, Instance, InstanceState,
                     Issue, Limits, OutlierOptions, Report, Request, Route,
                     Upstream, UpstreamKind)

ENC = "utf-8"
ERRORS = "surrogateescape"  # bytes that are not UTF-8 survive a round trip


def text(p: Any) -> str:
    """A NUL-terminated C string as str ("" for NULL)."""
    if p == ffi.NULL:
        return ""
    return ffi.string(p).decode(ENC, ERRORS)


def opt_text(p: Any) -> Optional[str]:
    return None if p == ffi.NULL else ffi.string(p).decode(ENC, ERRORS)


def slice_text(s: Any) -> str:
    """An sy_str as str."""
    if s.ptr == ffi.NULL or s.len == 0:
        return ""
    return ffi.unpack(s.ptr, s.len).decode(ENC, ERRORS)


def to_bytes(value: Any) -> bytes:
    """A document or route as bytes: str, bytes-like, or a JSON value."""
    if isinstance(value, str):
        return value.encode(ENC, ERRORS)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return json.dumps(value).encode(ENC)


def cstr(value: str) -> bytes:
    return value.encode(ENC, ERRORS)


# ------------------------------------------------------------------------
# Exceptions raised inside callbacks
# ------------------------------------------------------------------------

class _Pending(threading.local):
    depth = 0
    exc: Optional[BaseException] = None


_pending = _Pending()


def stash(exc: BaseException) -> None:
    """Keep the first exception a callback raised on this thread, for the
    trap around the C call to re-raise. A callback that runs outside any
    trap (a route_detach run by the garbage collector freeing a router)
    has no caller to raise into: its exception is logged."""
    if _pending.depth == 0:
        logging.getLogger("switchyard").error(
            "exception in a switchyard callback outside any call",
            exc_info=(type(exc), exc, exc.__traceback__))
        return
    if _pending.exc is None:
        _pending.exc = exc


class trap:
    """Wrap a C call that may run Python callbacks on this thread.

    An exception a callback raised (and stashed) is re-raised when the
    outermost trap exits, even if the C call itself reported success; it
    takes precedence over the library error the callback may have caused.
    A writer call that succeeded marks the trap with :meth:`published`:
    then the callback's exception is wrapped in CallbackAfterPublishError
    carrying the report, because the change was made.
    """
    __slots__ = ("_published", "_report")

    def __init__(self) -> None:
        self._published = False
        self._report: Any = None

    def published(self, rc: int, report: Any = None) -> None:
        """The C writer call returned rc: a change was published if rc >= 0."""
        if rc >= 0:
            self._published = True
            self._report = report

    def __enter__(self) -> "trap":
        if _pending.depth == 0:
            _pending.exc = None
        _pending.depth += 1
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        _pending.depth -= 1
        if _pending.depth == 0 and _pending.exc is not None:
            exc, _pending.exc = _pending.exc, None
            if self._published and ev is None:
                raise _errors.CallbackAfterPublishError(
                    exc, self._report) from exc
            if ev is not None and ev is not exc:
                raise exc from ev
            raise exc


def check(rc: int, err: Any, report: Any = None) -> None:
    if rc < 0:
        raise _errors.from_c(rc, err, report)


def new_error() -> Any:
    return ffi.new("sy_error *")


def set_error(err: Any, message: str) -> None:
    """Write a message into a caller's sy_error (callbacks reporting)."""
    if err == ffi.NULL:
        return
    data = message.encode(ENC, "replace")[:255]
    ffi.memmove(err.message, data + b"\0", len(data) + 1)


# ------------------------------------------------------------------------
# Per-thread match contexts
# ------------------------------------------------------------------------

class CtxSlot:
    """A match context and a count of the matches run on it: a Match
    remembers (slot, serial) so that target() can use the C match in place
    while no other match has run on the context since."""
    __slots__ = ("ptr", "serial", "__weakref__")

    def __init__(self) -> None:
        out = ffi.new("sy_match_ctx **")
        err = new_error()
        check(lib.sy_match_ctx_new(ffi.NULL, out, err), err)
        self.ptr: Any = ffi.gc(out[0], lib.sy_match_ctx_free)
        self.serial = 0

    def free(self) -> None:
        p, self.ptr = self.ptr, None
        if p is not None:
            ffi.release(p)


class _Contexts(threading.local):
    slot: Optional[CtxSlot] = None
    busy = False


_contexts = _Contexts()


class match_context:
    """This thread's match context, or a fresh one when it is in use (a
    host predicate that matches from inside a match). ``with`` gives the
    CtxSlot; its ``ptr`` is the sy_match_ctx."""
    __slots__ = ("slot", "mine")

    def __enter__(self) -> CtxSlot:
        if _contexts.busy:
            self.mine = False
            self.slot = CtxSlot()
            return self.slot
        if _contexts.slot is None:
            _contexts.slot = CtxSlot()
        _contexts.busy = True
        self.mine = True
        self.slot = _contexts.slot
        return self.slot

    def __exit__(self, *exc: Any) -> None:
        if self.mine:
            _contexts.busy = False
        else:
            self.slot.free()


# ------------------------------------------------------------------------
# Requests
# ------------------------------------------------------------------------

def header_pairs(headers: HeadersLike) -> List[Tuple[str, str]]:
    if isinstance(headers, Mapping):
        pairs: List[Tuple[str, str]] = []
        for name, value in headers.items():
            if isinstance(value, (list, tuple)):
                pairs.extend((name, str(v)) for v in value)
            else:
                pairs.append((name, str(value)))
        return pairs
    return [(str(n), str(v)) for n, v in headers]


def as_request(request: Any, kwargs: Mapping[str, Any]) -> Request:
    if request is None:
        return Request(**kwargs)
    if kwargs:
        raise TypeError("pass a Request or keyword arguments, not both")
    if isinstance(request, Request):
        return request
    if isinstance(request, Mapping):
        return Request(**request)
    raise TypeError(f"expected a Request, got {type(request).__name__}")


def now_ms(now: Any) -> int:
    if now is None:
        return 0
    if isinstance(now, datetime):
        if now.tzinfo is None:
            now = now.replace(tzinfo=timezone.utc)
        return int(round(now.timestamp() * 1000))
    return int(now)


class CRequest:
    """An sy_request whose slices point into buffers this object keeps."""
    __slots__ = ("ptr", "_keep")

    def __init__(self, req: Request) -> None:
        keep: List[Any] = []
        scheme = req.scheme or ""
        host = req.host
        path = req.path
        query = req.query
        if req.url is not None:
            url = req.url
            if url.startswith("/"):
                upath, _, uquery = url.partition("?")
                uquery = uquery.partition("#")[0]
                unet = ""
            else:
                parts = urlsplit(url)
                scheme = scheme or parts.scheme
                unet, upath, uquery = parts.netloc, parts.path, parts.query
            path = upath if path is None else path
            query = uquery if query is None else query
            if host is None and unet:
                host = unet.rpartition("@")[2]
        pairs = header_pairs(req.headers)
        if host is None:
            for name, value in pairs:
                if name.lower() == "host":
                    host = value
                    break
        r = ffi.new("sy_request *")
        r.size = ffi.sizeof("sy_request")
        self._set(r.method, req.method, keep)
        self._set(r.scheme, scheme, keep)
        self._set(r.host, host or "", keep)
        self._set(r.path, path or "/", keep)
        self._set(r.query, query or "", keep)
        self._set(r.remote_addr, req.remote_addr or "", keep)
        if pairs:
            hs = ffi.new("sy_header[]", len(pairs))
            keep.append(hs)
            for i, (name, value) in enumerate(pairs):
                self._set(hs[i].name, name, keep)
                self._set(hs[i].value, value, keep)
            r.headers = hs
            r.header_count = len(pairs)
        # the library reads now_ms 0 as "not given" (the router's clock),
        # a negative content_length as unknown and seed 0 as not pinned:
        # values that would be read so are refused, not matched otherwise
        r.now_ms = now_ms(req.now)
        if req.now is not None and r.now_ms == 0:
            raise _errors.InvalidArgumentError(
                f"now {req.now!r}: epoch 0 reads as 'not given' (the "
                "router's clock); pass None for that, or another time")
        seed = int(req.seed)
        if not 0 <= seed <= 0xFFFFFFFFFFFFFFFF:
            raise _errors.InvalidArgumentError(
                f"seed {req.seed!r}: must be 0 (not pinned) to 2**64-1")
        r.seed = seed
        if req.content_length is not None and int(req.content_length) < 0:
            raise _errors.InvalidArgumentError(
                f"content_length {req.content_length!r}: must be 0 or more "
                "bytes (None: unknown)")
        r.content_length = -1 if req.content_length is None else int(
            req.content_length)
        self._set(r.principal, req.principal or "", keep)
        self.ptr = r
        self._keep = keep

    @staticmethod
    def _set(s: Any, value: str, keep: List[Any]) -> None:
        if not value:
            return
        data = cstr(value)
        buf = ffi.from_buffer("char[]", data)
        keep.append(buf)
        s.ptr = buf
        s.len = len(data)


def request_from_c(r: Any) -> Request:
    """A Python Request describing a C sy_request (host predicates)."""
    headers = tuple((slice_text(r.headers[i].name), slice_text(r.headers[i].value))
                    for i in range(r.header_count))
    return Request(
        method=slice_text(r.method), path=slice_text(r.path),
        query=slice_text(r.query), headers=headers,
        host=slice_text(r.host), scheme=slice_text(r.scheme),
        remote_addr=slice_text(r.remote_addr),
        now=int(r.now_ms) or None,
        seed=int(r.seed),
        content_length=None if r.content_length < 0 else int(r.content_length),
        principal=slice_text(r.principal) or None)


# ------------------------------------------------------------------------
# Routes, issues, diffs, reports
# ------------------------------------------------------------------------

def upstream_from_c(u: Any) -> Upstream:
    return Upstream(UpstreamKind(u.kind), text(u.scheme), text(u.host),
                    int(u.port), text(u.path))


def route_upstream(r: Any) -> Upstream:
    u = ffi.new("sy_upstream *")
    lib.sy_route_upstream(r, u)
    return upstream_from_c(u)


UINT32_MAX = 0xFFFFFFFF


def route_key(r: Any) -> Optional[int]:
    key = int(lib.sy_route_key(r))
    return None if key == UINT32_MAX else key


def route_host_data(r: Any) -> Any:
    """The Python object route_attach returned for this C route, or None.
    Only the binding's route_attach sets host data, always to a handle kept
    alive until route_detach."""
    p = lib.sy_route_host_data(r)
    return None if p == ffi.NULL else ffi.from_handle(p)


def route_from_c(r: Any, source: Optional[str] = None) -> Route:
    meta = {}
    for i in range(lib.sy_route_metadata_count(r)):
        kv = lib.sy_route_metadata_at(r, i)
        meta[text(kv.key)] = text(kv.value)
    preds = tuple(text(lib.sy_route_predicate_name(r, i))
                  for i in range(lib.sy_route_predicate_count(r)))
    return Route(
        id=text(lib.sy_route_id(r)), uri=text(lib.sy_route_uri(r)),
        order=int(lib.sy_route_order(r)),
        fingerprint=int(lib.sy_route_fingerprint(r)),
        disabled=bool(lib.sy_route_disabled(r)), upstream=route_upstream(r),
        metadata=MappingProxyType(meta), predicates=preds,
        canonical=text(lib.sy_route_canonical(r)), source=source,
        key=route_key(r), host_data=route_host_data(r),
        host_runs=_route_host_runs(r),
        connect_timeout_ms=_route_timeout(r, lib.SY_TIMEOUT_CONNECT),
        response_timeout_ms=_route_timeout(r, lib.SY_TIMEOUT_RESPONSE))


def _route_timeout(r: Any, kind: int) -> Optional[float]:
    ms = ffi.new("uint64_t *")
    setting = lib.sy_route_timeout(r, kind, ms)
    if setting == lib.SY_TIMEOUT_MS:
        return int(ms[0])
    return math.inf if setting == lib.SY_TIMEOUT_NONE else None


def _route_host_runs(r: Any) -> Tuple[str, ...]:
    n = int(lib.sy_route_host_runs(r, ffi.NULL, 0))
    if not n:
        return ()
    names = ffi.new("char *[]", n)
    lib.sy_route_host_runs(r, names, n)
    return tuple(text(names[i]) for i in range(n))


def issue_from_c(e: Any) -> Issue:
    return Issue(code=int(e.code), code_name=_errors.code_name(int(e.code)),
                 message=text(e.message), path=text(e.path),
                 line=int(e.line), column=int(e.column), offset=int(e.offset))


def diff_from_c(d: Any) -> Diff:
    added = tuple(text(lib.sy_diff_added(d, i))
                  for i in range(lib.sy_diff_added_count(d)))
    removed = tuple(text(lib.sy_diff_removed(d, i))
                    for i in range(lib.sy_diff_removed_count(d)))
    bits = ffi.new("unsigned *")
    updated = []
    for i in range(lib.sy_diff_updated_count(d)):
        rid = text(lib.sy_diff_updated(d, i, bits))
        updated.append((rid, Changed(int(bits[0]))))
    reordered = tuple(text(lib.sy_diff_reordered(d, i))
                      for i in range(lib.sy_diff_reordered_count(d)))
    return Diff(added, removed, tuple(updated),
                int(lib.sy_diff_unchanged_count(d)), reordered)


def _ids(count: Callable[[Any], int], at: Callable[[Any, int], Any],
         rep: Any) -> Tuple[str, ...]:
    return tuple(text(at(rep, i)) for i in range(count(rep)))


def report_from_c(rep: Any) -> Report:
    d = lib.sy_report_diff(rep)
    failed = int(lib.sy_report_failed_change(rep))
    return Report(
        source=opt_text(lib.sy_report_source(rep)),
        version=opt_text(lib.sy_report_version(rep)),
        skipped=bool(lib.sy_report_skipped(rep)),
        generation=int(lib.sy_report_generation(rep)),
        diff=None if d == ffi.NULL else diff_from_c(d),
        parse_us=int(lib.sy_report_parse_us(rep)),
        publish_us=int(lib.sy_report_publish_us(rep)),
        issues=tuple(issue_from_c(lib.sy_report_issue(rep, i))
                     for i in range(lib.sy_report_issue_count(rep))),
        instances_added=_ids(lib.sy_report_instances_added_count,
                             lib.sy_report_instance_added, rep),
        instances_removed=_ids(lib.sy_report_instances_removed_count,
                             lib.sy_report_instance_removed, rep),
        instances_changed=_ids(lib.sy_report_instances_changed_count,
                               lib.sy_report_instance_changed, rep),
        service=opt_text(lib.sy_report_service(rep)),
        version_not_bumped=bool(lib.sy_report_version_not_bumped(rep)),
        parts=tuple(report_from_c(lib.sy_report_part(rep, i))
                    for i in range(lib.sy_report_part_count(rep))),
        failed_change=None if failed < 0 else failed)


def take_report(out: Any) -> Optional[Report]:
    """Convert and free the report a call stored in *out (if any)."""
    if out[0] == ffi.NULL:
        return None
    try:
        return report_from_c(out[0])
    finally:
        lib.sy_report_free(out[0])
        out[0] = ffi.NULL


def fill_limits(c: Any, limits: Optional[Limits]) -> None:
    if limits is None:
        return
    c.max_document_bytes = limits.max_document_bytes
    c.max_routes = limits.max_routes
    c.max_string_bytes = limits.max_string_bytes
    c.max_depth = limits.max_depth


def fill_outlier(c: Any, o: Any) -> None:
    if o is None:
        return
    if isinstance(o, Mapping):
        o = OutlierOptions(**o)
    c.consecutive_failures = o.consecutive_failures
    c.base_ejection_ms = o.base_ejection_ms
    c.max_ejection_ms = o.max_ejection_ms
    c.max_ejected_percent = o.max_ejected_percent
    c.disabled = bool(o.disabled)


def _metadata_text(inst: Instance, key: Any, value: Any) -> str:
    """A metadata value as the instances format reads it: a string, or an
    integer or boolean as its JSON text ("version": 2 is "2")."""
    if isinstance(key, str):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, str)):
            return str(value)
    raise _errors.InvalidArgumentError(
        f"instance {inst.id!r}: metadata {key!r}: {value!r}: keys are "
        "strings, values strings (or integers, booleans, taken as their "
        "text; write a version such as 1.10 as a string)")


def fill_instance(c: Any, inst: Instance, keep: List[Any]) -> None:
    def s(value: str) -> Any:
        b = ffi.new("char[]", cstr(value))
        keep.append(b)
        return b
    c.id = s(inst.id)
    c.host = s(inst.host)
    # what the C struct cannot hold is refused naming the instance (cffi
    # raised OverflowError or TypeError naming none); 0 is the library's
    # to refuse, with its path
    if isinstance(inst.port, bool) or not isinstance(inst.port, int) \
            or not 0 <= inst.port <= 65535:
        raise _errors.InvalidArgumentError(
            f"instance {inst.id!r}: port {inst.port!r}: must be an integer "
            "from 1 to 65535")
    c.port = inst.port
    # bool("false") is True: a string was a TLS instance
    if not isinstance(inst.secure, bool):
        raise _errors.InvalidArgumentError(
            f"instance {inst.id!r}: secure {inst.secure!r}: must be True or "
            "False")
    c.secure = inst.secure
    # the library reads 0 as 1 (a zeroed struct's default): refused here,
    # as the instances format refuses it, not taken as a full share
    if isinstance(inst.weight, bool) or not isinstance(inst.weight, int) \
            or not 1 <= inst.weight <= 0xFFFFFFFF:
        raise _errors.InvalidArgumentError(
            f"instance {inst.id!r}: weight {inst.weight!r}: must be an "
            "integer from 1 to 4294967295 (0 would count as 1; to take an "
            "instance out, set its state)")
    c.weight = inst.weight
    c.state = int(InstanceState(inst.state))
    meta = list(inst.metadata.items())
    if meta:
        kvs = ffi.new("sy_kv[]", len(meta))
        keep.append(kvs)
        for i, (k, v) in enumerate(meta):
            text = _metadata_text(inst, k, v)
            kvs[i].key = s(k)
            kvs[i].value = s(text)
        c.metadata = kvs
        c.metadata_count = len(meta)


def as_instance(value: Any) -> Instance:
    if isinstance(value, Instance):
        return value
    if isinstance(value, Mapping):
        d = dict(value)
        if "metadata" in d:
            d["metadata"] = MappingProxyType(dict(d["metadata"]))
        if "state" in d and isinstance(d["state"], str):
            st = InstanceState.__members__.get(d["state"].upper())
            if st is None:
                raise _errors.InvalidArgumentError(
                    f"instance {d.get('id')!r}: state {d['state']!r}: must "
                    "be up, draining or down (any case)")
            d["state"] = st
        return Instance(**d)
    raise TypeError(f"expected an Instance, got {type(value).__name__}")
