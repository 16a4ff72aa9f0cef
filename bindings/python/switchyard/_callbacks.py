"""The C callbacks, implemented in Python with cffi's ``extern "Python"``.

Each callback receives a ``void *`` made with ``ffi.new_handle`` from one of
the small state objects below (never from a Router itself, so no reference
cycle runs through a handle). A callback never lets an exception escape
into C: it stashes it (see _convert.trap) and returns a failure value; the
Python call that triggered it re-raises it.
"""
from __future__ import annotations

import logging
import re
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._convert import (ENC, ERRORS, report_from_c, request_from_c,
                       route_from_c, set_error, stash, text, to_bytes)
from ._native import ffi, lib
from ._errors import InvalidArgumentError
from ._types import ExplainStep, Shadow

logger = logging.getLogger("switchyard")

_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING,
           3: logging.ERROR}

SY_ENOTFOUND = -15
SY_ECALLBACK = -19
SY_EARG = -10
INT64_MAX = 0x7FFFFFFFFFFFFFFF
_GENKEY = re.compile(r"_genkey_[0-9]+")


class RouterCallbacks:
    """The Python side of a router's ``callback_data``."""

    def __init__(self, on_event: Optional[Callable[[Any], None]],
                 on_retired_held: Optional[Callable[[int, int], None]],
                 clock: Optional[Callable[[], int]],
                 random: Optional[Callable[[], int]],
                 log: logging.Logger) -> None:
        self.on_event = on_event
        self.on_retired_held = on_retired_held
        self.clock = clock
        self.random = random
        self.log = log
        self.route_attach: Optional[Callable[[Any], Any]] = None
        self.route_detach: Optional[Callable[[Any, Any], None]] = None
        # host data handles by address: kept alive from route_attach until
        # the route's route_detach, which drops them exactly once
        self.host_data: Dict[int, Any] = {}
        self.host_lock = threading.Lock()


@ffi.def_extern()
def _sy_py_on_log(data: Any, level: int, message: Any) -> None:
    try:
        cb: RouterCallbacks = ffi.from_handle(data)
        cb.log.log(_LEVELS.get(int(level), logging.INFO), "%s", text(message))
    except BaseException as exc:  # noqa: BLE001 - re-raised by the caller
        stash(exc)


@ffi.def_extern()
def _sy_py_on_event(data: Any, report: Any) -> None:
    try:
        cb: RouterCallbacks = ffi.from_handle(data)
        if cb.on_event is not None:
            cb.on_event(report_from_c(report))
    except BaseException as exc:  # noqa: BLE001
        stash(exc)


@ffi.def_extern()
def _sy_py_on_retired_held(data: Any, generation: int, age_ms: int) -> None:
    try:
        cb: RouterCallbacks = ffi.from_handle(data)
        if cb.on_retired_held is not None:
            cb.on_retired_held(int(generation), int(age_ms))
    except BaseException as exc:  # noqa: BLE001
        stash(exc)


@ffi.def_extern()
def _sy_py_clock_ms(data: Any) -> int:
    try:
        cb: RouterCallbacks = ffi.from_handle(data)
        assert cb.clock is not None
        value = int(cb.clock())
        # past int64 cffi would print the error and hand C a 0 (1970)
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise InvalidArgumentError(
                f"clock returned {value}: not epoch milliseconds (must fit "
                "in a signed 64-bit integer)")
        return value
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        return 0


@ffi.def_extern()
def _sy_py_random(data: Any) -> int:
    try:
        cb: RouterCallbacks = ffi.from_handle(data)
        assert cb.random is not None
        return int(cb.random()) & 0xFFFFFFFFFFFFFFFF
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        return 0


def _addr(p: Any) -> int:
    return int(ffi.cast("uintptr_t", p))


@ffi.def_extern()
def _sy_py_route_attach(data: Any, route: Any) -> Any:
    try:
        cb: RouterCallbacks = ffi.from_handle(data)
        if cb.route_attach is None:
            return ffi.NULL
        obj = cb.route_attach(route_from_c(route))
        if obj is None:
            return ffi.NULL
        handle = ffi.new_handle(obj)
        with cb.host_lock:
            cb.host_data[_addr(handle)] = handle
        return handle
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        return ffi.NULL


@ffi.def_extern()
def _sy_py_route_detach(data: Any, route: Any, host_data: Any) -> None:
    try:
        cb: RouterCallbacks = ffi.from_handle(data)
        obj = None
        if host_data != ffi.NULL:
            with cb.host_lock:
                handle = cb.host_data.pop(_addr(host_data))
            obj = ffi.from_handle(handle)
        if cb.route_detach is not None:
            # the route as it was, without the data being released
            r = route_from_c(route)
            cb.route_detach(r, obj)
    except BaseException as exc:  # noqa: BLE001
        stash(exc)


# ------------------------------------------------------------------------
# Loaders
# ------------------------------------------------------------------------

class _Loan:
    """Document bytes lent to the router until it calls release."""
    __slots__ = ("buf", "owner", "handle")

    def __init__(self, buf: Any, owner: "Loader") -> None:
        self.buf = buf
        self.owner = owner
        self.handle = None


class Loader:
    """A Python function that returns a source's document."""

    def __init__(self, fn: Callable[[str], Any]) -> None:
        self.fn = fn
        self.loans: Dict[int, Any] = {}
        self.lock = threading.Lock()

    def lend(self, data: bytes) -> Tuple[Any, Any]:
        loan = _Loan(ffi.new("char[]", data), self)
        handle = ffi.new_handle(loan)
        with self.lock:
            self.loans[id(loan)] = handle  # keeps loan (and buf) alive
        return loan.buf, handle

    def give_back(self, loan: _Loan) -> None:
        with self.lock:
            self.loans.pop(id(loan), None)


@ffi.def_extern()
def _sy_py_load(data: Any, source: Any, out: Any, err: Any) -> int:
    try:
        loader: Loader = ffi.from_handle(data)
        name = text(source)
        doc = loader.fn(name)
        if doc is None:
            set_error(err, f"loader has no document for source '{name}'")
            return SY_ENOTFOUND
        raw = to_bytes(doc)
        buf, handle = loader.lend(raw)
        out.bytes = buf
        out.len = len(raw)
        out.release = lib._sy_py_release_loaded
        out.data = handle
        return 0
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        set_error(err, f"loader raised {type(exc).__name__}: {exc}")
        return SY_ECALLBACK


@ffi.def_extern()
def _sy_py_release_loaded(data: Any, raw: Any) -> None:
    try:
        loan: _Loan = ffi.from_handle(data)
        loan.owner.give_back(loan)
    except BaseException as exc:  # noqa: BLE001
        stash(exc)


# ------------------------------------------------------------------------
# Explain
# ------------------------------------------------------------------------

class ExplainCollector:
    def __init__(self) -> None:
        self.steps: List[Any] = []


@ffi.def_extern()
def _sy_py_explain(data: Any, route: Any, matched: bool, failed: int,
                   failed_name: Any) -> int:
    try:
        col: ExplainCollector = ffi.from_handle(data)
        col.steps.append(ExplainStep(
            route_id=text(lib.sy_route_id(route)), matched=bool(matched),
            failed_predicate=None if matched else int(failed),
            failed_name=None if matched or failed_name == ffi.NULL
            else text(failed_name)))
        return 0
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        return 1


# ------------------------------------------------------------------------
# Shadowed routes
# ------------------------------------------------------------------------

@ffi.def_extern()
def _sy_py_shadow(data: Any, s: Any) -> int:
    try:
        found: List[Any] = ffi.from_handle(data)
        n = int(s.by_count)
        found.append(Shadow(
            route_id=text(lib.sy_route_id(s.route)), rank=int(s.rank),
            position=int(s.position), path=text(s.path),
            shadowed_by=tuple(text(lib.sy_route_id(s.by[i]))
                              for i in range(n)),
            shadowed_by_paths=tuple(text(s.by_path[i]) for i in range(n)),
            reason=text(s.reason)))
        return 0
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        return 1


# ------------------------------------------------------------------------
# Host-registered predicate and filter factories
# ------------------------------------------------------------------------

def _args(args: Any, n: int) -> List[Tuple[str, str]]:
    return [(text(args[i].key), text(args[i].value)) for i in range(n)]


def _too_many(name: str, fields: Tuple[str, ...],
              args: List[Tuple[str, str]]) -> Optional[str]:
    """A shortcut with more values than the factory declared fields: the
    library hands the extra values over as _genkey_N (a built-in refuses
    them); refused the built-ins' way when the factory declared fields."""
    if not fields or not any(_GENKEY.fullmatch(k) for k, _ in args):
        return None
    return (f"{name}: too many arguments (takes at most {len(fields)}: "
            f"{', '.join(fields)})")


class PredicateFactory:
    def __init__(self, compile: Callable[[List[Tuple[str, str]]],
                                         Callable[[Any], bool]],
                 fields: Tuple[str, ...] = (), name: str = "") -> None:
        self.compile = compile
        self.name = name
        self.fields = fields  # declared, DEFAULT type: the most it takes
        self.states: Dict[int, Any] = {}
        self.lock = threading.Lock()


class _PredicateState:
    __slots__ = ("test",)

    def __init__(self, test: Callable[[Any], bool]) -> None:
        self.test = test


class FilterFactory:
    def __init__(self, validate: Optional[Callable[[List[Tuple[str, str]]],
                                                   None]],
                 fields: Tuple[str, ...] = (), name: str = "") -> None:
        self.validate = validate
        self.name = name
        self.fields = fields


@ffi.def_extern()
def _sy_py_pred_compile(data: Any, args: Any, n: int, state: Any,
                        err: Any) -> int:
    try:
        factory: PredicateFactory = ffi.from_handle(data)
        pairs = _args(args, n)
        why = _too_many(factory.name, factory.fields, pairs)
        if why:
            set_error(err, why)
            return SY_EARG
        try:
            test = factory.compile(pairs)
        except ValueError as exc:  # invalid args: a document error
            set_error(err, str(exc) or type(exc).__name__)
            return SY_EARG
        if not callable(test):
            raise TypeError("a predicate factory must return a callable")
        st = _PredicateState(test)
        handle = ffi.new_handle(st)
        with factory.lock:
            factory.states[id(st)] = handle
        state[0] = handle
        return 0
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        set_error(err, f"predicate factory raised {type(exc).__name__}: {exc}")
        return SY_ECALLBACK


@ffi.def_extern()
def _sy_py_pred_test(state: Any, req: Any) -> bool:
    try:
        st: _PredicateState = ffi.from_handle(state)
        return bool(st.test(request_from_c(req)))
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        return False


@ffi.def_extern()
def _sy_py_key_resolve(data: Any, req: Any, route: Any, buf: Any, cap: int,
                       length: Any) -> int:
    """A key resolver registered from Python: fn(request, route) -> key
    (str or bytes; None or "" for no key)."""
    try:
        name, fn = ffi.from_handle(data)
        key = fn(request_from_c(req), route_from_c(route))
        if key is not None and not isinstance(key, (str, bytes)):
            # str() would key by its text: an object by its repr (a new
            # bucket each time), 42 and "42" one bucket
            raise TypeError(
                f"key resolver {name!r} returned {type(key).__name__}: a "
                "key is str, bytes or None")
        raw = b"" if key is None else (key if isinstance(key, bytes)
                                       else key.encode(ENC))
        if len(raw) > int(cap):
            # cut, two clients whose keys share the first cap bytes
            # (SY_KEY_RESOLVER_CAP) would share one bucket
            raise InvalidArgumentError(
                f"key resolver {name!r} returned a "
                f"key of {len(raw)} bytes: at most {int(cap)} fit (hash a "
                "longer key)")
        n = len(raw)
        ffi.memmove(buf, raw, n)
        length[0] = n
        return 0
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        length[0] = 0
        return -1


@ffi.def_extern()
def _sy_py_pred_free(data: Any, state: Any) -> None:
    try:
        if state == ffi.NULL:
            return
        factory: PredicateFactory = ffi.from_handle(data)
        st = ffi.from_handle(state)
        with factory.lock:
            factory.states.pop(id(st), None)
    except BaseException as exc:  # noqa: BLE001
        stash(exc)


@ffi.def_extern()
def _sy_py_filter_validate(data: Any, args: Any, n: int, err: Any) -> int:
    try:
        factory: FilterFactory = ffi.from_handle(data)
        pairs = _args(args, n)
        why = _too_many(factory.name, factory.fields, pairs)
        if why:
            set_error(err, why)
            return SY_EARG
        if factory.validate is None:
            return 0
        try:
            factory.validate(pairs)
        except ValueError as exc:
            set_error(err, str(exc) or type(exc).__name__)
            return SY_EARG
        return 0
    except BaseException as exc:  # noqa: BLE001
        stash(exc)
        set_error(err, f"filter validator raised {type(exc).__name__}: {exc}")
        return SY_ECALLBACK


__all__ = ["RouterCallbacks", "Loader", "ExplainCollector",
           "PredicateFactory", "FilterFactory", "route_from_c", "ENC",
           "ERRORS"]
