"""Documents, diffs, snapshots and host factory registries."""
from __future__ import annotations

import os
import weakref
from types import MappingProxyType
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Sequence, Tuple, Union, overload)

from . import _callbacks as cb
from . import _policy
from ._convert import (CRequest, as_request, check, cstr, diff_from_c,
                       fill_limits, issue_from_c, match_context, new_error,
                       opt_text, route_from_c, route_host_data, route_key,
                       route_upstream, slice_text, text, to_bytes, trap)
from ._errors import ClosedError, InvalidArgumentError
from ._native import ffi, lib
from ._types import (Action, Diff, ExplainStep, HostFilter, Instance, Shadow,
                     InstanceState, Issue, Limits, Match, NoMatch,
                     NoMatchReason, Request, ResponseOp, ResponseOpKind,
                     Route, Selection, ShortcutType, Target, UpstreamKind,
                     _enum_of)

DocumentLike = Union[str, bytes, bytearray, memoryview, list, dict]


# ------------------------------------------------------------------------
# Registry
# ------------------------------------------------------------------------

class Registry:
    """Host predicate and filter factories, registered by name.

    Fill it before handing it to :func:`parse` or :class:`Router`; after
    that it is frozen. It stays alive as long as any document or router
    that uses it.

    A predicate factory is ``compile(args) -> test`` where ``args`` is a
    list of ``(field, value)`` pairs and ``test(request) -> bool`` runs per
    request on the matching thread (it must not mutate shared state without
    a lock). ``compile`` raising ValueError makes the route invalid with
    that message; any other exception propagates out of the parse/apply.
    """

    def __init__(self) -> None:
        out = ffi.new("sy_registry **")
        err = new_error()
        check(lib.sy_registry_new(ffi.NULL, out, err), err)
        self._ptr = ffi.gc(out[0], lib.sy_registry_free)
        self._keep: List[Any] = []
        self._frozen = False
        self.names: List[str] = []

    def _fields(self, fields: Sequence[str]) -> Any:
        # a str is a sequence too: "tenant" would declare t, e, n, a, n, t
        if isinstance(fields, (str, bytes)) or not all(
                isinstance(f, str) for f in fields):
            raise InvalidArgumentError(
                f"shortcut_fields {fields!r}: must be a list of field "
                "names (strings)")
        if not fields:
            return ffi.NULL
        strs = [ffi.new("char[]", cstr(f)) for f in fields]
        arr = ffi.new("char *[]", strs + [ffi.NULL])
        self._keep.extend(strs)
        self._keep.append(arr)
        return arr

    @staticmethod
    def _shortcut_type(value: Any) -> int:
        # the library reads any type but DEFAULT as a list: 7 would run as
        # GATHER_LIST
        try:
            return int(_enum_of(ShortcutType, value))
        except (KeyError, ValueError, TypeError, AttributeError):
            raise InvalidArgumentError(
                f"shortcut_type {value!r}: must be a ShortcutType (DEFAULT, "
                "GATHER_LIST, GATHER_LIST_TAIL_FLAG) or its name") from None

    @staticmethod
    def _bounded(fields: Sequence[str], stype: int) -> Tuple[str, ...]:
        """The fields a DEFAULT shortcut fills, one value each: more values
        are refused (a gathered type takes any number)."""
        return tuple(fields) if stype == ShortcutType.DEFAULT else ()

    def _check_open(self) -> None:
        if self._frozen:
            raise ClosedError("registry is in use by a document or router; "
                              "it can no longer change")

    def add_predicate(self, name: str,
                      compile: Callable[[List[Tuple[str, str]]],
                                        Callable[[Request], bool]], *,
                      shortcut_fields: Sequence[str] = (),
                      shortcut_type: Union[ShortcutType, str] = ShortcutType.DEFAULT
                      ) -> None:
        """Register a predicate factory under ``name``."""
        self._check_open()
        f = ffi.new("sy_predicate_factory *")
        f.shortcut_type = self._shortcut_type(shortcut_type)
        f.shortcut_fields = self._fields(shortcut_fields)
        factory = cb.PredicateFactory(compile, self._bounded(
            shortcut_fields, f.shortcut_type), name)
        handle = ffi.new_handle(factory)
        f.compile = lib._sy_py_pred_compile
        f.test = lib._sy_py_pred_test
        f.free = lib._sy_py_pred_free
        f.data = handle
        err = new_error()
        check(lib.sy_registry_add_predicate(self._ptr, cstr(name), f, err),
              err)
        self._keep.append(handle)
        self.names.append(name)

    def add_filter(self, name: str,
                   validate: Optional[Callable[[List[Tuple[str, str]]],
                                               None]] = None, *,
                   shortcut_fields: Sequence[str] = (),
                   shortcut_type: Union[ShortcutType, str] = ShortcutType.DEFAULT
                   ) -> None:
        """Register a host-run filter under ``name``; ``validate(args)``
        raising ValueError rejects the route."""
        self._check_open()
        f = ffi.new("sy_filter_factory *")
        f.shortcut_type = self._shortcut_type(shortcut_type)
        f.shortcut_fields = self._fields(shortcut_fields)
        factory = cb.FilterFactory(validate, self._bounded(
            shortcut_fields, f.shortcut_type), name)
        handle = ffi.new_handle(factory)
        f.validate = lib._sy_py_filter_validate
        f.data = handle
        err = new_error()
        check(lib.sy_registry_add_filter(self._ptr, cstr(name), f, err), err)
        self._keep.append(handle)
        self.names.append(name)

    def add_key_resolver(self, name: str,
                         resolve: Callable[[Request, Route],
                                           Union[str, bytes, None]]) -> None:
        """Register a RequestRateLimiter key resolver, named in documents as
        SCG names beans: ``"key-resolver": "#{@name}"``. ``resolve(request,
        route)`` runs per request on the matching thread and returns the
        key, str or bytes (None or "" for no key: deny-empty-key decides);
        any other type raises TypeError naming the resolver at the call
        that asked for the key."""
        self._check_open()
        handle = ffi.new_handle((name, resolve))
        kr = ffi.new("sy_key_resolver *")
        kr.resolve = lib._sy_py_key_resolve
        kr.data = handle
        err = new_error()
        check(lib.sy_registry_add_key_resolver(self._ptr, cstr(name), kr,
                                               err), err)
        self._keep.append(handle)
        self.names.append(name)

    def _use(self) -> Any:
        self._frozen = True
        return self._ptr


# ------------------------------------------------------------------------
# Documents
# ------------------------------------------------------------------------

def _shadowed(call: Any, ptr: Any) -> List[Shadow]:
    found: List[Shadow] = []
    handle = ffi.new_handle(found)
    err = new_error()
    with trap():
        check(call(ptr, ffi.NULL, lib._sy_py_shadow, handle, err), err)
    return found


class Document:
    """A parsed and compiled route document (see :func:`parse`).

    Routes are copied out as :class:`Route` values; the C document is freed
    by :meth:`close`, by the ``with`` statement, or by garbage collection.
    """

    def __init__(self, ptr: Any, registry: Optional[Registry]) -> None:
        self._ptr = ffi.gc(ptr, lib.sy_document_free)
        self._registry = registry  # must outlive the document
        self._routes: Optional[Tuple[Route, ...]] = None

    def _p(self) -> Any:
        if self._ptr is None:
            raise ClosedError("document is closed")
        return self._ptr

    def close(self) -> None:
        """Free the C document now (idempotent)."""
        if self._ptr is not None:
            p, self._ptr = self._ptr, None
            with trap():
                ffi.release(p)

    def __enter__(self) -> "Document":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._ptr is None

    @property
    def version(self) -> Optional[str]:
        """The envelope's version, or None."""
        return opt_text(lib.sy_document_version(self._p()))

    @property
    def fingerprint(self) -> int:
        return int(lib.sy_document_fingerprint(self._p()))

    @property
    def checksum(self) -> int:
        return int(lib.sy_document_checksum(self._p()))

    @property
    def routes(self) -> Tuple[Route, ...]:
        """The valid routes in document order."""
        if self._routes is None:
            p = self._p()
            self._routes = tuple(
                route_from_c(lib.sy_document_route(p, i))
                for i in range(lib.sy_document_route_count(p)))
        return self._routes

    @property
    def issues(self) -> Tuple[Issue, ...]:
        """Lenient mode: the dropped routes, one issue each."""
        p = self._p()
        return tuple(issue_from_c(lib.sy_document_issue(p, i))
                     for i in range(lib.sy_document_issue_count(p)))

    def shadowed(self) -> List[Shadow]:
        """Routes no request can reach, in rank order: shadowed by routes
        ranked above them, or matching nothing (sy_document_shadowed)."""
        return _shadowed(lib.sy_document_shadowed, self._p())

    def __len__(self) -> int:
        return int(lib.sy_document_route_count(self._p()))

    def __iter__(self) -> Iterator[Route]:
        return iter(self.routes)

    def __getitem__(self, index: int) -> Route:
        return self.routes[index]

    def get(self, route_id: str) -> Optional[Route]:
        for r in self.routes:
            if r.id == route_id:
                return r
        return None

    def __repr__(self) -> str:
        if self._ptr is None:
            return "<switchyard.Document closed>"
        return (f"<switchyard.Document version={self.version!r} "
                f"routes={len(self)} fingerprint={self.fingerprint:#018x}>")


def parse(document: DocumentLike, *, lenient: bool = False,
          limits: Optional[Limits] = None,
          registry: Optional[Registry] = None,
          host_runs: Union[str, Sequence[str], None] = None) -> Document:
    """Parse, validate and compile a route document.

    ``document`` is JSON text (str or bytes) or an already-decoded JSON
    value (list of routes or ``{"version":..., "routes": [...]}``). Strict
    mode raises on the first invalid route; lenient mode drops invalid
    routes and lists them in :attr:`Document.issues`. ``host_runs``
    refuses what that host does not run (see :class:`Router`). The GIL is
    released while the library works.
    """
    raw = to_bytes(document)
    keep: List[Any] = []
    opts = ffi.new("sy_parse_options *")
    opts.size = ffi.sizeof("sy_parse_options")
    opts.lenient = lenient
    fill_limits(opts.limits, limits)
    if registry is not None:
        opts.registry = registry._use()
    if host_runs is not None:
        opts.host_runs = _policy.c_host_runs(host_runs, keep)
    out = ffi.new("sy_document **")
    err = new_error()
    with trap():
        rc = lib.sy_document_parse(raw, len(raw), opts, out, err)
        check(rc, err)
    return Document(out[0], registry)


def parse_instances(document: DocumentLike) -> Dict[str, List[Instance]]:
    """Parse and check an instances document (sy_instances_parse): the JSON
    form of service instance lists, ``{"services": {"orders": [...]}}`` or
    ``{"orders": [...]}`` (format: docs/route-definitions.md, "Instances
    documents"). Returns ``{service: [Instance, ...]}`` in document order,
    ready for :meth:`Router.set_instances`; raises on the first error, with
    its path (``services.orders[1].port``)."""
    raw = to_bytes(document)
    out = ffi.new("sy_instances **")
    err = new_error()
    with trap():
        rc = lib.sy_instances_parse(raw, len(raw), ffi.NULL, out, err)
        check(rc, err)
    doc = out[0]
    try:
        result: Dict[str, List[Instance]] = {}
        for i in range(lib.sy_instances_service_count(doc)):
            items = []
            for k in range(lib.sy_instances_count(doc, i)):
                c = lib.sy_instances_at(doc, i, k)
                items.append(Instance(
                    id=text(c.id), host=text(c.host), port=int(c.port),
                    secure=bool(c.secure), weight=int(c.weight),
                    state=InstanceState(int(c.state)),
                    metadata=MappingProxyType({
                        text(c.metadata[j].key): text(c.metadata[j].value)
                        for j in range(c.metadata_count)})))
            result[text(lib.sy_instances_service(doc, i))] = items
        return result
    finally:
        lib.sy_instances_free(doc)


def parse_file(path: Union[str, "os.PathLike[str]"], **kwargs: Any
               ) -> Document:
    """:func:`parse` the contents of a file."""
    with open(path, "rb") as f:
        return parse(f.read(), **kwargs)


# ------------------------------------------------------------------------
# Snapshots
# ------------------------------------------------------------------------

def _release_snapshot(ptr: Any, owner: Any) -> None:
    lib.sy_snapshot_release(ptr)
    owner.decref()


class Snapshot:
    """A published, immutable route table (acquired from a Router).

    Release it with :meth:`release` or a ``with`` block; if you forget,
    garbage collection releases it. It is released exactly once either
    way. A snapshot may be used from any thread, but not released while
    another thread is using it.
    """

    def __init__(self, ptr: Any, owner: Any) -> None:
        self._ptr = ptr
        self._owner = owner
        self._release = weakref.finalize(self, _release_snapshot, ptr, owner)

    def _p(self) -> Any:
        if not self._release.alive:
            raise ClosedError("snapshot is released")
        return self._ptr

    def release(self) -> None:
        """Give the snapshot back (idempotent)."""
        self._release()

    @property
    def released(self) -> bool:
        return not self._release.alive

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    @property
    def generation(self) -> int:
        return int(lib.sy_snapshot_generation(self._p()))

    @property
    def fingerprint(self) -> int:
        return int(lib.sy_snapshot_fingerprint(self._p()))

    def __len__(self) -> int:
        return int(lib.sy_snapshot_route_count(self._p()))

    def _route(self, r: Any) -> Route:
        src = ffi.new("char **")
        lib.sy_snapshot_find_route(self._p(), lib.sy_route_id(r), src)
        return route_from_c(r, opt_text(src[0]))

    def __getitem__(self, index: int) -> Route:
        """The index-th route in rank order."""
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("snapshot route index out of range")
        return self._route(lib.sy_snapshot_route_at(self._p(), index))

    def __iter__(self) -> Iterator[Route]:
        """Routes in rank order (order, then source, then position)."""
        for i in range(len(self)):
            yield self[i]

    @property
    def routes(self) -> Tuple[Route, ...]:
        return tuple(self)

    def get(self, route_id: str) -> Optional[Route]:
        """The route with this id (with its source), or None."""
        src = ffi.new("char **")
        r = lib.sy_snapshot_find_route(self._p(), cstr(route_id), src)
        if r == ffi.NULL:
            return None
        return route_from_c(r, opt_text(src[0]))

    def __contains__(self, route_id: object) -> bool:
        return isinstance(route_id, str) and lib.sy_snapshot_find_route(
            self._p(), cstr(route_id), ffi.NULL) != ffi.NULL

    @property
    def route_key_limit(self) -> int:
        """One more than the largest route key of this snapshot: the size
        of a per-route list indexed by ``Route.key`` / ``Match.route_key``."""
        return int(lib.sy_snapshot_route_key_limit(self._p()))

    def _run_match(self, creq: CRequest, slot: Any, linear: bool) -> Any:
        fn = lib.sy_snapshot_match_linear if linear else lib.sy_snapshot_match
        out = ffi.new("sy_match **")
        slot.serial += 1
        check(fn(self._p(), slot.ptr, creq.ptr, out), ffi.NULL)
        return out[0]

    def match(self, request: Optional[Request] = None, *,
              linear: bool = False, **kwargs: Any) -> Optional[Match]:
        """Match a request: a :class:`Match`, or None when no route matches.

        Pass a :class:`Request` (or a dict) or its fields as keywords.
        ``linear=True`` uses the reference linear scan (the oracle).
        :meth:`resolve` says why nothing matched.
        """
        creq = CRequest(as_request(request, kwargs))
        with trap(), match_context() as slot:
            m = self._run_match(creq, slot, linear)
            if m == ffi.NULL:
                return None
            return _match_from_c(m, _Live(self, creq, slot, m))

    def resolve(self, request: Optional[Request] = None, *,
                linear: bool = False,
                **kwargs: Any) -> Union[Match, NoMatch]:
        """Match a request: a :class:`Match`, or a falsy :class:`NoMatch`
        that says why no route matched (404 no route, 405 with the Allow
        value, 400 bad path) — ``sy_match_ctx_nomatch``, at no extra cost.
        """
        creq = CRequest(as_request(request, kwargs))
        with trap(), match_context() as slot:
            m = self._run_match(creq, slot, linear)
            if m != ffi.NULL:
                return _match_from_c(m, _Live(self, creq, slot, m))
            allow = ffi.new("sy_str *")
            reason = NoMatchReason(int(lib.sy_match_ctx_nomatch(slot.ptr,
                                                                allow)))
            return NoMatch(reason, slice_text(allow[0]))

    def shadowed(self) -> List[Shadow]:
        """The live routes no request can reach, in rank order
        (sy_snapshot_shadowed)."""
        return _shadowed(lib.sy_snapshot_shadowed, self._p())

    def explain(self, request: Optional[Request] = None,
                **kwargs: Any) -> List[ExplainStep]:
        """For every route in rank order: did it match, and if not, which
        predicate failed first."""
        creq = CRequest(as_request(request, kwargs))
        col = cb.ExplainCollector()
        handle = ffi.new_handle(col)
        p = self._p()
        with trap(), match_context() as slot:
            slot.serial += 1
            check(lib.sy_snapshot_explain(p, slot.ptr, creq.ptr,
                                          lib._sy_py_explain, handle),
                  ffi.NULL)
        return col.steps

    def select(self, request: Optional[Request] = None,
               **kwargs: Any) -> Optional[Selection]:
        """Match the request and choose an instance for its lb:// route.

        None when no route matches; raises NoInstanceError when nothing is
        eligible, InvalidArgumentError when the route is not lb://.
        """
        creq = CRequest(as_request(request, kwargs))
        sel = ffi.new("sy_selection *")
        err = new_error()
        p = self._p()
        with trap(), match_context() as slot:
            m = self._run_match(creq, slot, False)
            if m == ffi.NULL:
                return None
            route_id = text(lib.sy_route_id(lib.sy_match_route(m)))
            check(lib.sy_snapshot_select(p, slot.ptr, m, creq.ptr, sel, err),
                  err)
            return Selection(route_id=route_id, id=text(sel.id),
                             host=text(sel.host), port=int(sel.port),
                             scheme=text(sel.scheme),
                             service=text(sel.service))

    def target(self, request: Optional[Request] = None, *,
               exclude: Iterable[str] = (),
               **kwargs: Any) -> Optional[Target]:
        """Match the request and return its :class:`Target` (None when no
        route matches): ``snap.match(request).target(exclude)`` in one."""
        m = self.match(request, **kwargs)
        return None if m is None else m.target(exclude)

    def __repr__(self) -> str:
        if self.released:
            return "<switchyard.Snapshot released>"
        return (f"<switchyard.Snapshot generation={self.generation} "
                f"routes={len(self)}>")


class _Live:
    """What a Match needs to reach its C match again: the snapshot (held by
    the caller), the request buffers the match borrows, and the context
    slot and serial it was made on."""
    __slots__ = ("snapshot", "creq", "where", "route")

    def __init__(self, snapshot: "Snapshot", creq: CRequest, slot: Any,
                 m: Any) -> None:
        self.snapshot = snapshot
        self.creq = creq
        # (slot, serial, C match): replaced as one value, so that a thread
        # never pairs one thread's slot with another thread's match
        self.where = (slot, slot.serial, m)
        self.route = lib.sy_match_route(m)

    def target(self, match: Match, exclude: Iterable[str]) -> Target:
        """Match.target() (the match reaches its C result through this
        object, so _types needs no import of this module)."""
        return match_target(match, exclude)

    def policy(self, match: Match, kind: str, now_ms: int) -> Any:
        """Match.ratelimit() / breaker() / retry_policy()."""
        return _policy.run(match, kind, now_ms, with_c_match)


def _exclusions(exclude: Iterable[str]) -> Tuple[Any, int, List[Any]]:
    if isinstance(exclude, str):
        exclude = [exclude]
    ids = [ffi.new("char[]", cstr(str(x))) for x in exclude]
    if not ids:
        return ffi.NULL, 0, []
    arr = ffi.new("char *[]", ids)
    return arr, len(ids), ids + [arr]


def _target_from_c(t: Any, route_id: str, snapshot: "Snapshot") -> Target:
    headers = tuple((slice_text(t.headers[i].name),
                     slice_text(t.headers[i].value))
                    for i in range(t.header_count))
    meta = {text(t.metadata[i].key): text(t.metadata[i].value)
            for i in range(t.metadata_count)}
    return Target(
        kind=UpstreamKind(int(t.kind)), scheme=text(t.scheme),
        host=text(t.host), port=int(t.port), path=slice_text(t.path),
        query=slice_text(t.query), host_header=slice_text(t.host_header),
        headers=headers, service=opt_text(t.service),
        instance_id=opt_text(t.instance_id), version=opt_text(t.version),
        zone=opt_text(t.zone), metadata=MappingProxyType(meta),
        route_id=route_id,
        _health=None if t.health == ffi.NULL else t.health,
        _snapshot=snapshot)


def match_target(match: Match, exclude: Iterable[str]) -> Target:
    """Match.target(): sy_match_target on the match's C result. The C match
    lives in the per-thread context until the next match on it; when one has
    run since (or target() is called on another thread), the request is
    matched again on this thread's context, on the same snapshot."""
    live = match._live
    if live is None:
        raise InvalidArgumentError(
            "this Match was not made by a snapshot: it has no target")
    snap: Snapshot = live.snapshot
    snap._p()  # ClosedError once the snapshot is released
    arr, n, keep = _exclusions(exclude)
    t = ffi.new("sy_target *")
    err = new_error()

    def run(m: Any) -> Target:
        check(lib.sy_match_target(m, arr, n, t, err), err)
        return _target_from_c(t, match.route_id, snap)
    result = with_c_match(match, run)
    del keep
    return result


def with_c_match(match: Match, fn: Callable[[Any], Any]) -> Any:
    """fn(the C match of `match`), on this thread's context: the match is
    run again there when another one has run since (on the same snapshot,
    which must still be held)."""
    live = match._live
    snap: Snapshot = live.snapshot
    snap._p()  # ClosedError once the snapshot is released
    with trap(), match_context() as slot:
        where_slot, serial, m = live.where
        if where_slot is not slot or slot.serial != serial:
            m = snap._run_match(live.creq, slot, False)
            if m == ffi.NULL or lib.sy_match_route(m) != live.route:
                raise InvalidArgumentError(
                    f"the request no longer matches route "
                    f"'{match.route_id}' (a Weight draw?): match it again")
            live.where = (slot, slot.serial, m)
        return fn(m)


def _match_from_c(m: Any, live: Optional[_Live] = None) -> Match:
    r = lib.sy_match_route(m)
    name = ffi.new("sy_str *")
    value = ffi.new("sy_str *")
    vars_ = {}
    for i in range(lib.sy_match_var_count(m)):
        lib.sy_match_var(m, i, name, value)
        vars_[slice_text(name[0])] = slice_text(value[0])
    headers = []
    for i in range(lib.sy_match_header_count(m)):
        h = lib.sy_match_header(m, i)
        headers.append((slice_text(h.name), slice_text(h.value)))
    ops = []
    for i in range(lib.sy_match_response_op_count(m)):
        op = lib.sy_match_response_op(m, i)
        ops.append(ResponseOp(ResponseOpKind(op.kind), slice_text(op.name),
                              slice_text(op.value), slice_text(op.arg)))
    filters = []
    for i in range(lib.sy_match_host_filter_count(m)):
        f = lib.sy_match_host_filter(m, i)
        filters.append(HostFilter(text(f.name), tuple(
            (text(f.args[j].key), text(f.args[j].value))
            for j in range(f.arg_count))))
    redirect = lib.sy_match_redirect(m)
    return Match(
        route_id=text(lib.sy_route_id(r)), upstream=route_upstream(r),
        action=Action(lib.sy_match_action(m)),
        status=int(lib.sy_match_status(m)),
        redirect=None if redirect.ptr == ffi.NULL else slice_text(redirect),
        path=slice_text(lib.sy_match_path(m)),
        query=slice_text(lib.sy_match_query(m)), headers=tuple(headers),
        preserve_host=bool(lib.sy_match_preserve_host(m)),
        response_ops=tuple(ops), host_filters=tuple(filters),
        vars=MappingProxyType(vars_), route_key=route_key(r),
        host_data=route_host_data(r), _live=live)


# ------------------------------------------------------------------------
# Diffs
# ------------------------------------------------------------------------

@overload
def diff(old: Document, new: Document) -> Diff: ...
@overload
def diff(old: Snapshot, new: Snapshot) -> Diff: ...


def diff(old: Any, new: Any) -> Diff:
    """Diff two documents or two snapshots by route id and fingerprint.

    Documents may also be given as JSON text or values (parsed strictly).
    """
    out = ffi.new("sy_diff **")
    err = new_error()
    if isinstance(old, Snapshot) and isinstance(new, Snapshot):
        check(lib.sy_diff_snapshots(old._p(), new._p(), ffi.NULL, out, err),
              err)
    else:
        if isinstance(old, Snapshot) or isinstance(new, Snapshot):
            raise TypeError("diff() takes two documents or two snapshots")
        a = old if isinstance(old, Document) else parse(old)
        b = new if isinstance(new, Document) else parse(new)
        check(lib.sy_diff_documents(a._p(), b._p(), ffi.NULL, out, err), err)
    try:
        return diff_from_c(out[0])
    finally:
        lib.sy_diff_free(out[0])

