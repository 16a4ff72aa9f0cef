"""The Router: sources, applies, one-route changes, instances, snapshots."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import weakref
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping,
                    Optional, Sequence, Tuple, Union)

from . import _callbacks as cb
from . import _policy
from ._policy import BreakerInfo
from ._convert import (as_instance, check, cstr, fill_instance, fill_limits,
                       fill_outlier, issue_from_c, new_error, take_report,
                       text, to_bytes, trap)
from ._core import DocumentLike, Registry, Snapshot
from ._errors import ClosedError, InvalidArgumentError
from ._native import ffi, lib
from ._types import (EscapedSlashes, ExplainStep, Instance, InstanceDelta,
                     InstanceOp, Limits, Match, Metrics, NoMatch,
                     OutlierOptions, Outcome, PathNormalization, Report,
                     Request, Route, Selection, SourceStatus, Target,
                     _enum_of)

_SY_ETOOSMALL = -22


def _instance_array(instances: Iterable[Union[Instance, dict]]
                    ) -> Tuple[Any, int, List[Any]]:
    items = [as_instance(i) for i in instances]
    keep: List[Any] = []
    arr = ffi.new("sy_instance[]", max(len(items), 1))
    for i, inst in enumerate(items):
        fill_instance(arr[i], inst, keep)
    keep.append(arr)
    return arr, len(items), keep


def _delta_array(deltas: Iterable[InstanceDelta]
                 ) -> Tuple[Any, int, List[Any]]:
    items = list(deltas)
    keep: List[Any] = []
    arr = ffi.new("sy_instance_delta[]", max(len(items), 1))
    for i, d in enumerate(items):
        arr[i].op = int(InstanceOp(d.op))
        fill_instance(arr[i].instance, as_instance(d.instance), keep)
    keep.append(arr)
    return arr, len(items), keep


class _Owner:
    """Owns the C router: one reference for the Router object plus one per
    live Snapshot and per call in progress; the router is freed when the
    last goes, so a snapshot can never outlive it whatever the order in
    which close(), release() and the garbage collector run."""

    def __init__(self, ptr: Any, keep: List[Any]) -> None:
        self.ptr = ptr
        self.keep = keep  # handles, registry: must outlive the C router
        # the router's clock callback, for calls whose C now_ms 0 means
        # real time (BreakerPermit.record) rather than this clock
        self.clock: Optional[Callable[[], int]] = None
        # and its random callback, for RetryPolicy.next's jitter draws
        self.random: Optional[Callable[[], int]] = None
        self.refs = 1
        self.closed = False
        self.lock = threading.Lock()

    def incref(self) -> Any:
        with self.lock:
            if self.closed or self.ptr is None:
                raise ClosedError("router is closed")
            self.refs += 1
            return self.ptr

    def decref(self) -> None:
        with self.lock:
            self.refs -= 1
            if self.refs > 0:
                return
            p, self.ptr = self.ptr, None
        if p is not None:
            lib.sy_router_free(p)
            self.keep.clear()

    def close(self) -> bool:
        with self.lock:
            if self.closed:
                return False
            self.closed = True
        self.decref()
        return True

    @contextlib.contextmanager
    def use(self) -> Iterator[Any]:
        p = self.incref()
        try:
            yield p
        finally:
            self.decref()


class Router:
    """A router: named sources of route documents, published as snapshots.

    Writer calls (apply, upsert, remove, ..., set_instances) may come from
    any thread; the library serializes them. Readers :meth:`acquire`
    snapshots and match on them from any number of threads; every C call
    releases the GIL.

    Options: ``lenient`` (drop invalid routes instead of failing the
    document), ``limits``, ``strip_host_port``, ``default_filters`` (a list
    of filter entries or its JSON text), ``registry`` (host factories),
    ``history`` (documents kept per source for rollback, 0: 8),
    ``max_retired`` (retired snapshot cap) and ``retired_warn_ms`` (the
    age of a held retired snapshot that calls ``on_retired_held``: give
    both or neither), and callbacks: ``on_event(report)`` after every
    publish, ``on_retired_held(generation, age_ms)``, ``clock() -> epoch ms``,
    ``random() -> int``. Library logs go to ``logger`` (default: the
    "switchyard" logger). An exception raised by a callback is re-raised
    from the call that triggered it; when that call is a writer call that
    published its change anyway, it is wrapped in
    :class:`CallbackAfterPublishError` (carrying the report).

    Since 0.2: ``route_attach(route) -> object`` and
    ``route_detach(route, object)`` (host data per route, see
    :attr:`Match.host_data`), ``skip_same_version`` (skip a document whose
    version equals the live one even when its bytes differ),
    ``path_normalization`` (:class:`PathNormalization` or "normalize" /
    "as_is"), ``merge_slashes``, ``escaped_slashes``
    (:class:`EscapedSlashes` or "keep" / "reject" / "decode") and
    ``outlier`` (:class:`OutlierOptions` or a dict of its fields).

    Since 0.3: ``host_runs`` (what this host runs: a host name of
    :func:`host_profile`, "gateway" or "nginx", or a list of item names;
    a document using anything else is refused with NotRunError) and
    ``policy_slots`` (rate-limit bucket slots of the router's own policy
    store, docs/policies.md).
    """

    def __init__(self, *, lenient: bool = False,
                 limits: Optional[Limits] = None,
                 strip_host_port: bool = False,
                 default_filters: Union[str, Sequence[Any], None] = None,
                 registry: Optional[Registry] = None, history: int = 0,
                 max_retired: int = 0, retired_warn_ms: int = 0,
                 on_event: Optional[Callable[[Report], None]] = None,
                 on_retired_held: Optional[Callable[[int, int], None]] = None,
                 clock: Optional[Callable[[], int]] = None,
                 random: Optional[Callable[[], int]] = None,
                 logger: Optional[logging.Logger] = None,
                 route_attach: Optional[Callable[[Route], Any]] = None,
                 route_detach: Optional[Callable[[Route, Any], None]] = None,
                 skip_same_version: bool = False,
                 path_normalization: Union[PathNormalization, str] =
                 PathNormalization.NORMALIZE,
                 merge_slashes: bool = False,
                 escaped_slashes: Union[EscapedSlashes, str] =
                 EscapedSlashes.KEEP,
                 outlier: Union[OutlierOptions, Mapping[str, Any],
                                None] = None,
                 host_runs: Union[str, Sequence[str], None] = None,
                 policy_slots: int = 0) -> None:
        # the library checks held snapshots only when retired_warn_ms > 0
        # and then calls on_retired_held: one without the other is unused
        if on_retired_held is not None and not retired_warn_ms:
            raise InvalidArgumentError(
                "on_retired_held is never called without retired_warn_ms "
                "(the age, > 0, of a held retired snapshot that calls it)")
        if retired_warn_ms and on_retired_held is None:
            raise InvalidArgumentError(
                f"retired_warn_ms {retired_warn_ms!r} does nothing without "
                "on_retired_held (the callback it triggers)")
        callbacks = cb.RouterCallbacks(on_event, on_retired_held, clock,
                                       random, logger or cb.logger)
        callbacks.route_attach = route_attach
        callbacks.route_detach = route_detach
        handle = ffi.new_handle(callbacks)
        keep: List[Any] = [handle, callbacks]
        o = ffi.new("sy_router_options *")
        o.size = ffi.sizeof("sy_router_options")
        o.lenient = lenient
        fill_limits(o.limits, limits)
        o.strip_host_port = strip_host_port
        if default_filters is not None:
            text = (default_filters if isinstance(default_filters, str)
                    else json.dumps(list(default_filters)))
            buf = ffi.new("char[]", cstr(text))
            keep.append(buf)
            o.default_filters = buf
        if registry is not None:
            o.registry = registry._use()
            keep.append(registry)
        o.history = history
        o.max_retired = max_retired
        o.retired_warn_ms = retired_warn_ms
        o.on_log = lib._sy_py_on_log
        o.on_event = lib._sy_py_on_event
        if on_retired_held is not None:
            o.on_retired_held = lib._sy_py_on_retired_held
        if clock is not None:
            o.clock_ms = lib._sy_py_clock_ms
        if random is not None:
            o.random = lib._sy_py_random
        if route_attach is not None:
            o.route_attach = lib._sy_py_route_attach
        if route_attach is not None or route_detach is not None:
            o.route_detach = lib._sy_py_route_detach
        o.skip_same_version = skip_same_version
        o.path_normalization = int(_enum_of(PathNormalization,
                                            path_normalization))
        o.merge_slashes = merge_slashes
        o.escaped_slashes = int(_enum_of(EscapedSlashes, escaped_slashes))
        fill_outlier(o.outlier, outlier)
        if host_runs is not None:
            o.host_runs = _policy.c_host_runs(host_runs, keep)
        o.policy_slots = policy_slots
        o.callback_data = handle
        out = ffi.new("sy_router **")
        err = new_error()
        with trap():
            check(lib.sy_router_new(o, out, err), err)
        self._callbacks = callbacks
        self._owner = _Owner(out[0], keep)
        self._owner.clock = clock
        self._owner.random = random
        self._finalizer = weakref.finalize(self, self._owner.close)
        self._loaders: dict[str, Any] = {}

    # -- lifetime ---------------------------------------------------------

    def close(self) -> None:
        """Drop the router. The C router is freed once every snapshot
        acquired from it is released too. Idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._owner.closed

    def __enter__(self) -> "Router":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def on_event(self) -> Optional[Callable[[Report], None]]:
        return self._callbacks.on_event

    @on_event.setter
    def on_event(self, fn: Optional[Callable[[Report], None]]) -> None:
        self._callbacks.on_event = fn

    # -- sources and documents --------------------------------------------

    def add_source(self, name: str) -> None:
        """Register a config source (at most 256 at a time); the order of
        places breaks rank ties: a new source takes the lowest place a
        removed one freed, else the next (without removals, registration
        order)."""
        err = new_error()
        with self._owner.use() as p, trap():
            check(lib.sy_router_add_source(p, cstr(name), err), err)

    def remove_source(self, name: str) -> None:
        """Remove a source that has no live routes (apply ``[]`` first):
        its status, rollback history and loader go, and its place is free
        for a later :meth:`add_source`. :class:`BusyError` while it has
        live routes or a notify of it runs, :class:`NotFoundError` for an
        unknown name; nothing changes then."""
        err = new_error()
        with self._owner.use() as p, trap():
            check(lib.sy_router_remove_source(p, cstr(name), err), err)

    def apply(self, source: str, document: DocumentLike) -> Report:
        """Apply a whole document for a source and publish it.

        Returns the :class:`Report` (``skipped`` when the version or bytes
        equal the last applied ones). On failure nothing changes and the
        exception's ``report`` attribute holds the report, if any.
        """
        raw = to_bytes(document)
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_apply(p, cstr(source), raw, len(raw), out, err)
            report = take_report(out)
            t.published(rc, report)
            check(rc, err, report)
        assert report is not None
        return report

    def upsert(self, source: str, route: Union[str, bytes, dict]) -> None:
        """Add or replace one route (a route object) in a source; an
        updated route keeps its rank position."""
        raw = to_bytes(route)
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_upsert_route(p, cstr(source), raw, len(raw),
                                            err)
            t.published(rc)
            check(rc, err)

    def remove(self, route_id: str) -> None:
        """Remove one route by id (NotFoundError if absent)."""
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_remove_route(p, cstr(route_id), err)
            t.published(rc)
            check(rc, err)

    def set_enabled(self, route_id: str, enabled: bool) -> None:
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_set_route_enabled(p, cstr(route_id), enabled,
                                                 err)
            t.published(rc)
            check(rc, err)

    def disable(self, route_id: str) -> None:
        """Keep the route defined but never match it."""
        self.set_enabled(route_id, False)

    def enable(self, route_id: str) -> None:
        self.set_enabled(route_id, True)

    def rollback(self, source: str, version: Optional[str] = None
                 ) -> Report:
        """Re-apply an earlier applied version of a source (None: the
        document before the current one, as :meth:`ChangeSet.rollback`)."""
        out = ffi.new("sy_report **")
        err = new_error()
        v = ffi.NULL if version is None else cstr(str(version))
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_rollback(p, cstr(source), v, out, err)
            report = take_report(out)
            t.published(rc, report)
            check(rc, err, report)
        assert report is not None
        return report

    # -- pull sources --------------------------------------------------------

    def set_loader(self, source: str,
                   load: Callable[[str], Union[DocumentLike, None]]) -> None:
        """Register ``load(source) -> document`` for a pull source; the
        document is then applied on :meth:`notify`. ``load`` returning None
        fails the notify with NotFoundError; raising propagates out of
        notify."""
        loader = cb.Loader(load)
        handle = ffi.new_handle(loader)
        err = new_error()
        with self._owner.use() as p, trap():
            check(lib.sy_router_set_loader(p, cstr(source),
                                           lib._sy_py_load, handle, err), err)
        self._owner.keep.append(handle)
        self._loaders[source] = handle

    def notify(self, source: str) -> None:
        """The source changed: load and apply it (on this thread, unless an
        apply is already running, which then does one more)."""
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_notify(p, cstr(source), err)
            t.published(rc)
            check(rc, err)

    # -- instances ---------------------------------------------------------

    def set_instances(self, service: str,
                      instances: Iterable[Union[Instance, dict]]) -> Report:
        """Replace a service's whole instance list; published at once."""
        arr, n, keep = _instance_array(instances)
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_set_instances(p, cstr(service), arr, n, out,
                                             err)
            report = take_report(out)
            t.published(rc, report)
            check(rc, err, report)
        assert report is not None
        return report

    def update_instances(self, service: str,
                         deltas: Iterable[InstanceDelta]) -> Report:
        """Apply instance changes (:class:`InstanceDelta`) to a service."""
        arr, n, keep = _delta_array(deltas)
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_update_instances(p, cstr(service), arr, n,
                                                out, err)
            report = take_report(out)
            t.published(rc, report)
            check(rc, err, report)
        assert report is not None
        return report

    # -- change sets ---------------------------------------------------------

    def change_set(self) -> "ChangeSet":
        """A new, empty :class:`ChangeSet` of this router. As a context
        manager it commits on a clean exit of the ``with`` block (nothing is
        committed when the block raises); or call :meth:`commit`."""
        return ChangeSet(self)

    def commit(self, change_set: "ChangeSet") -> Report:
        """Publish every change staged in ``change_set`` as ONE snapshot,
        all or nothing (``sy_router_commit``).

        Returns the :class:`Report`, with one part per change
        (``report.parts``). On failure nothing is published and the error
        raised (the class of its code: RegexError, ValidationError, ...)
        has ``change`` (the index of the change that failed), ``path``
        (where in that change) and ``report``. A change set is committed
        at most once.
        """
        if change_set._router is not self:
            raise InvalidArgumentError(
                "the change set belongs to another router")
        cs = change_set._p()
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap() as t:
            rc = lib.sy_router_commit(p, cs, out, err)
            report = take_report(out)
            t.published(rc, report)
            if rc >= 0:
                change_set._committed = True
                change_set.report = report
            check(rc, err, report)
        assert report is not None
        return report

    # -- passive health ------------------------------------------------------

    def report_outcome(self, target: Target,
                       outcome: Union[Outcome, str, int]) -> None:
        """Feed passive health with the outcome of an attempt to the
        instance of ``target`` (``sy_router_report_outcome``): "success",
        "connect_failure", "5xx" or "timeout" (or an :class:`Outcome`).
        After ``outlier.consecutive_failures`` failures in a row the
        instance is ejected for a while, without a publish. Targets of URL
        routes are ignored. The snapshot the target came from must still be
        held (ClosedError otherwise). Lock-free; any thread."""
        o = Outcome.of(outcome)
        snap = target._snapshot
        if snap is None:
            raise InvalidArgumentError(
                "this Target was not made by Match.target()")
        if snap._owner is not self._owner:
            raise InvalidArgumentError("the target comes from another router")
        snap._p()  # ClosedError once released: the instance may be gone
        if target._health is None:
            return
        t = ffi.new("sy_target *")
        t.kind = int(target.kind)
        t.health = target._health
        with self._owner.use() as p, trap():
            lib.sy_router_report_outcome(p, t, int(o))

    # -- policies ------------------------------------------------------------

    def policy_stats(self) -> Dict[str, int]:
        """Counters of the router's policy store (sy_policy_store_stats):
        slots, buckets_used, limited, store_full, breaker_opened, ..."""
        with self._owner.use() as p, trap():
            return _policy.store_stats(lib.sy_router_policy_store(p))

    def breaker(self, name: str) -> Optional[BreakerInfo]:
        """The state of the circuit breaker ``name`` (None until a route
        naming it has been published; then closed, with no calls, until
        its first request)."""
        with self._owner.use() as p, trap():
            return _policy.store_breaker(lib.sy_router_policy_store(p), name)

    # -- status ----------------------------------------------------------------

    def source_status(self) -> List[SourceStatus]:
        """The status of every source, in registration order."""
        st = ffi.new("sy_source_status *")
        err = new_error()
        result: List[SourceStatus] = []
        with self._owner.use() as p:
            n = int(lib.sy_router_source_count(p))
            for i in range(n):
                check(lib.sy_router_source_status(p, i, st, err), err)
                le = st.last_error
                version = text(st.version)
                result.append(SourceStatus(
                    name=text(st.name), version=version or None,
                    applied=bool(st.applied), checksum=int(st.checksum),
                    fingerprint=int(st.fingerprint), routes=int(st.routes),
                    last_apply_ms=int(st.last_apply_ms),
                    last_result=int(st.last_result),
                    last_error=issue_from_c(le) if le.code < 0 else None,
                    applied_count=int(st.applied_count),
                    skipped_count=int(st.skipped_count),
                    failed_count=int(st.failed_count)))
        return result

    def metrics_text(self) -> str:
        """Every metric, source status and snapshot gauge in the
        Prometheus text exposition format (0.0.4), ready to serve on
        ``/metrics`` (``sy_router_metrics_text``)."""
        cap = 8192
        need = ffi.new("size_t *")
        err = new_error()
        with self._owner.use() as p:
            while True:
                buf = ffi.new("char[]", cap)
                rc = lib.sy_router_metrics_text(p, buf, cap, need, err)
                if rc == _SY_ETOOSMALL:
                    cap = max(int(need[0]), cap * 2)
                    continue
                check(rc, err)
                return ffi.unpack(buf, int(need[0])).decode("utf-8",
                                                            "replace")

    # -- readers --------------------------------------------------------------

    def acquire(self) -> Snapshot:
        """The current snapshot (wait-free). Use it in a ``with`` block or
        call :meth:`Snapshot.release`."""
        p = self._owner.incref()
        try:
            snap = lib.sy_router_acquire(p)
        except BaseException:
            self._owner.decref()
            raise
        return Snapshot(snap, self._owner)

    def match(self, request: Optional[Request] = None,
              **kwargs: Any) -> Optional[Match]:
        """Acquire, match, release."""
        with self.acquire() as snap:
            return snap.match(request, **kwargs)

    def explain(self, request: Optional[Request] = None,
                **kwargs: Any) -> List[ExplainStep]:
        with self.acquire() as snap:
            return snap.explain(request, **kwargs)

    def select(self, request: Optional[Request] = None,
               **kwargs: Any) -> Optional[Selection]:
        with self.acquire() as snap:
            return snap.select(request, **kwargs)

    def resolve(self, request: Optional[Request] = None,
                **kwargs: Any) -> Union[Match, NoMatch]:
        """Acquire, :meth:`Snapshot.resolve`, release. The Match can no
        longer give a target (its snapshot is released): to forward, use
        ``with router.acquire() as snap:`` and the snapshot's methods."""
        with self.acquire() as snap:
            return snap.resolve(request, **kwargs)

    def reclaim(self) -> int:
        """Free retired snapshots whose readers are gone; how many."""
        with self._owner.use() as p, trap():
            return int(lib.sy_router_reclaim(p))

    def metrics(self) -> Metrics:
        m = ffi.new("sy_metrics *")
        with self._owner.use() as p:
            lib.sy_router_metrics(p, m)
        return Metrics(**{f.name: int(getattr(m, f.name))
                          for f in dataclasses.fields(Metrics)})

    def __repr__(self) -> str:
        if self.closed:
            return "<switchyard.Router closed>"
        m = self.metrics()
        return (f"<switchyard.Router generation={m.generation} "
                f"routes={m.routes}>")


def _free_change_set(ptr: Any, owner: Any) -> None:
    lib.sy_change_set_free(ptr)
    owner.decref()


class ChangeSet:
    """Changes staged to be published as ONE snapshot, all or nothing
    (``sy_change_set_*``). Make it with :meth:`Router.change_set`::

        with router.change_set() as cs:
            cs.apply("orders", document)
            cs.set_instances("orders", instances)
        print(cs.report.parts)

    Staging copies its arguments and checks only their types; everything
    else is checked at commit, in staging order, each change seeing the
    ones before it. Each staging method returns the change's index (what
    ``error.change`` and ``report.parts`` refer to). The ``with`` block
    commits when it ends without an exception and discards the changes
    otherwise; a commit failure is raised from the end of the block. A
    change set is committed at most once, and staged from one thread at a
    time.
    """

    def __init__(self, router: Router) -> None:
        owner = router._owner
        p = owner.incref()
        out = ffi.new("sy_change_set **")
        err = new_error()
        try:
            check(lib.sy_change_set_new(p, out, err), err)
        except BaseException:
            owner.decref()
            raise
        self._router = router
        self._ptr = out[0]
        self._free = weakref.finalize(self, _free_change_set, out[0], owner)
        self._committed = False
        #: the commit's Report, once committed
        self.report: Optional[Report] = None

    def _p(self) -> Any:
        if not self._free.alive:
            raise ClosedError("change set is closed")
        if self._committed:
            raise ClosedError("change set is already committed")
        return self._ptr

    def close(self) -> None:
        """Free the change set (idempotent); uncommitted changes are
        dropped."""
        self._free()

    @property
    def committed(self) -> bool:
        return self._committed

    def __len__(self) -> int:
        if not self._free.alive:
            return 0
        return int(lib.sy_change_set_count(self._ptr))

    def __enter__(self) -> "ChangeSet":
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        try:
            if et is None and not self._committed:
                self.commit()
        finally:
            self.close()

    def commit(self) -> Report:
        """:meth:`Router.commit` this change set."""
        return self._router.commit(self)

    def _staged(self, rc: int, err: Any) -> int:
        check(rc, err)
        return len(self) - 1

    def apply(self, source: str, document: DocumentLike) -> int:
        """Stage a whole document for a source (as Router.apply)."""
        raw = to_bytes(document)
        err = new_error()
        return self._staged(lib.sy_change_set_apply(
            self._p(), cstr(source), raw, len(raw), err), err)

    def upsert(self, source: str, route: Union[str, bytes, dict]) -> int:
        """Stage adding or replacing one route (as Router.upsert)."""
        raw = to_bytes(route)
        err = new_error()
        return self._staged(lib.sy_change_set_upsert_route(
            self._p(), cstr(source), raw, len(raw), err), err)

    def remove(self, route_id: str) -> int:
        """Stage removing one route by id."""
        err = new_error()
        return self._staged(lib.sy_change_set_remove_route(
            self._p(), cstr(route_id), err), err)

    def set_enabled(self, route_id: str, enabled: bool) -> int:
        err = new_error()
        return self._staged(lib.sy_change_set_set_route_enabled(
            self._p(), cstr(route_id), bool(enabled), err), err)

    def disable(self, route_id: str) -> int:
        return self.set_enabled(route_id, False)

    def enable(self, route_id: str) -> int:
        return self.set_enabled(route_id, True)

    def rollback(self, source: str, version: Optional[str] = None) -> int:
        """Stage a rollback of a source to an earlier applied version (None:
        the document before the current one)."""
        err = new_error()
        v = ffi.NULL if version is None else cstr(str(version))
        return self._staged(lib.sy_change_set_rollback(
            self._p(), cstr(source), v, err), err)

    def set_instances(self, service: str,
                      instances: Iterable[Union[Instance, dict]]) -> int:
        """Stage replacing a service's whole instance list."""
        arr, n, keep = _instance_array(instances)
        err = new_error()
        return self._staged(lib.sy_change_set_set_instances(
            self._p(), cstr(service), arr, n, err), err)

    def update_instances(self, service: str,
                         deltas: Iterable[InstanceDelta]) -> int:
        """Stage instance changes (:class:`InstanceDelta`)."""
        arr, n, keep = _delta_array(deltas)
        err = new_error()
        return self._staged(lib.sy_change_set_update_instances(
            self._p(), cstr(service), arr, n, err), err)

    def __repr__(self) -> str:
        state = ("committed" if self._committed else
                 "closed" if not self._free.alive else "open")
        return f"<switchyard.ChangeSet {state} changes={len(self)}>"
