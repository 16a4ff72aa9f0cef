"""The Router: sources, applies, one-route changes, instances, snapshots."""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import weakref
from typing import (Any, Callable, Iterable, Iterator, List, Optional,
                    Sequence, Union)

from . import _callbacks as cb
from ._convert import (as_instance, check, cstr, fill_instance, fill_limits,
                       new_error, take_report, to_bytes, trap)
from ._core import DocumentLike, Registry, Snapshot
from ._errors import ClosedError
from ._native import ffi, lib
from ._types import (ExplainStep, Instance, InstanceDelta, InstanceOp, Limits,
                     Match, Metrics, Report, Request, Selection)


class _Owner:
    """Owns the C router: one reference for the Router object plus one per
    live Snapshot and per call in progress; the router is freed when the
    last goes, so a snapshot can never outlive it whatever the order in
    which close(), release() and the garbage collector run."""

    def __init__(self, ptr: Any, keep: List[Any]) -> None:
        self.ptr = ptr
        self.keep = keep  # handles, registry: must outlive the C router
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
    ``max_retired`` and ``retired_warn_ms`` (retired snapshot cap and age
    warning), and callbacks: ``on_event(report)`` after every publish,
    ``on_retired_held(generation, age_ms)``, ``clock() -> epoch ms``,
    ``random() -> int``. Library logs go to ``logger`` (default: the
    "switchyard" logger). An exception raised by a callback is re-raised
    from the call that triggered it.
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
                 logger: Optional[logging.Logger] = None) -> None:
        callbacks = cb.RouterCallbacks(on_event, on_retired_held, clock,
                                       random, logger or cb.logger)
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
        o.callback_data = handle
        out = ffi.new("sy_router **")
        err = new_error()
        with trap():
            check(lib.sy_router_new(o, out, err), err)
        self._callbacks = callbacks
        self._owner = _Owner(out[0], keep)
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
        """Register a config source; registration order breaks rank ties."""
        err = new_error()
        with self._owner.use() as p, trap():
            check(lib.sy_router_add_source(p, cstr(name), err), err)

    def apply(self, source: str, document: DocumentLike) -> Report:
        """Apply a whole document for a source and publish it.

        Returns the :class:`Report` (``skipped`` when the version or bytes
        equal the last applied ones). On failure nothing changes and the
        exception's ``report`` attribute holds the report, if any.
        """
        raw = to_bytes(document)
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap():
            rc = lib.sy_router_apply(p, cstr(source), raw, len(raw), out, err)
            report = take_report(out)
            check(rc, err, report)
        assert report is not None
        return report

    def upsert(self, source: str, route: Union[str, bytes, dict]) -> None:
        """Add or replace one route (a route object) in a source; an
        updated route keeps its rank position."""
        raw = to_bytes(route)
        err = new_error()
        with self._owner.use() as p, trap():
            check(lib.sy_router_upsert_route(p, cstr(source), raw, len(raw),
                                             err), err)

    def remove(self, route_id: str) -> None:
        """Remove one route by id (NotFoundError if absent)."""
        err = new_error()
        with self._owner.use() as p, trap():
            check(lib.sy_router_remove_route(p, cstr(route_id), err), err)

    def set_enabled(self, route_id: str, enabled: bool) -> None:
        err = new_error()
        with self._owner.use() as p, trap():
            check(lib.sy_router_set_route_enabled(p, cstr(route_id),
                                                  enabled, err), err)

    def disable(self, route_id: str) -> None:
        """Keep the route defined but never match it."""
        self.set_enabled(route_id, False)

    def enable(self, route_id: str) -> None:
        self.set_enabled(route_id, True)

    def rollback(self, source: str, version: str) -> Report:
        """Re-apply an earlier applied version of a source."""
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap():
            rc = lib.sy_router_rollback(p, cstr(source), cstr(str(version)),
                                        out, err)
            report = take_report(out)
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
        with self._owner.use() as p, trap():
            check(lib.sy_router_notify(p, cstr(source), err), err)

    # -- instances ---------------------------------------------------------

    def set_instances(self, service: str,
                      instances: Iterable[Union[Instance, dict]]) -> Report:
        """Replace a service's whole instance list; published at once."""
        items = [as_instance(i) for i in instances]
        keep: List[Any] = []
        arr = ffi.new("sy_instance[]", max(len(items), 1))
        for i, inst in enumerate(items):
            fill_instance(arr[i], inst, keep)
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap():
            rc = lib.sy_router_set_instances(p, cstr(service), arr,
                                             len(items), out, err)
            report = take_report(out)
            check(rc, err, report)
        assert report is not None
        return report

    def update_instances(self, service: str,
                         deltas: Iterable[InstanceDelta]) -> Report:
        """Apply instance changes (:class:`InstanceDelta`) to a service."""
        items = list(deltas)
        keep: List[Any] = []
        arr = ffi.new("sy_instance_delta[]", max(len(items), 1))
        for i, d in enumerate(items):
            arr[i].op = int(InstanceOp(d.op))
            fill_instance(arr[i].instance, as_instance(d.instance), keep)
        out = ffi.new("sy_report **")
        err = new_error()
        with self._owner.use() as p, trap():
            rc = lib.sy_router_update_instances(p, cstr(service), arr,
                                                len(items), out, err)
            report = take_report(out)
            check(rc, err, report)
        assert report is not None
        return report

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

    def reclaim(self) -> int:
        """Free retired snapshots whose readers are gone; how many."""
        with self._owner.use() as p, trap():
            return int(lib.sy_router_reclaim(p))

    def metrics(self) -> Metrics:
        m = ffi.new("sy_metrics *")
        with self._owner.use() as p:
            lib.sy_router_metrics(p, m)
        return Metrics(int(m.generation), int(m.publishes),
                       int(m.live_snapshots), int(m.retired_snapshots),
                       int(m.reclaimed_snapshots), int(m.retired_bytes),
                       int(m.oldest_retired_age_ms), int(m.routes))

    def __repr__(self) -> str:
        if self.closed:
            return "<switchyard.Router closed>"
        m = self.metrics()
        return (f"<switchyard.Router generation={m.generation} "
                f"routes={m.routes}>")
