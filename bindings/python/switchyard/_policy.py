"""Policies: rate limits, circuit breakers and retries run by the library
(docs/policies.md), and what each host runs (run or refuse).

Reached through :meth:`Match.ratelimit`, :meth:`Match.breaker`,
:meth:`Match.retry_policy`, :meth:`Router.policy_stats` and
:meth:`Router.breaker`; key resolvers are registered with
:meth:`Registry.add_key_resolver`.
"""
from __future__ import annotations

import random as _random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ._convert import check, cstr, new_error, slice_text, text
from ._errors import InvalidArgumentError
from ._native import ffi, lib
from ._types import Match, Outcome

_STATES = ("closed", "open", "half_open")


@dataclass(frozen=True)
class RateLimit:
    """The answer of a route's rate limiters (sy_ratelimit). ``limited``
    False: the route has none. Denied: answer ``status``. ``headers`` are
    the four X-RateLimit-* headers to send (empty for an empty-key
    answer)."""
    limited: bool
    allowed: bool
    status: int = 0
    remaining: int = 0
    replenish_rate: int = 0
    burst_capacity: int = 0
    requested_tokens: int = 0
    key: str = ""
    empty_key: bool = False
    headers: Dict[str, str] = field(default_factory=dict)


class BreakerPermit:
    """Permission for one call through a CircuitBreaker
    (sy_breaker_permit). Call :meth:`record` with the outcome of every
    permitted call while the snapshot is held."""

    def __init__(self, c: Any, snapshot: Any,
                 clock: Optional[Callable[[], int]] = None) -> None:
        self._c = c
        self._snapshot = snapshot
        self._clock = clock
        self._recorded = False
        self.breaker = bool(c.breaker)
        self.permitted = bool(c.permitted)
        self.state = _STATES[int(c.state)]
        self.timeout_ms = int(c.timeout_ms)
        self.name = text(c.name) if c.name != ffi.NULL else None
        self.fallback = text(c.fallback) if c.fallback != ffi.NULL else None

    def record(self, outcome: Union[Outcome, str, int] = "success",
               status: int = 0, duration_ms: int = 0,
               now_ms: int = 0) -> str:
        """Report the call: "fallback" when it counts as a failure (go to
        the fallback or answer the error), "resume" for a connect failure
        under resumeWithoutError without a fallbackUri (answer an empty
        200, as SCG), else "pass". ``now_ms`` 0: the router's clock, as
        for :meth:`Match.breaker` (the C call would read real time)."""
        self._snapshot._p()  # ClosedError once released
        # the library would count a second record of one call as another
        if self._recorded:
            raise InvalidArgumentError(
                "this permit is already recorded: record() once per call, "
                "and ask breaker() again for the next one")
        if not now_ms and self._clock is not None:
            now_ms = int(self._clock())
        self._recorded = True
        v = lib.sy_breaker_record(self._c, int(Outcome.of(outcome)),
                                  int(status), int(duration_ms), int(now_ms))
        return ("pass", "fallback", "resume")[int(v)]

    def __repr__(self) -> str:
        return (f"BreakerPermit(name={self.name!r}, permitted="
                f"{self.permitted}, state={self.state!r})")


class RetryPolicy:
    """A route's compiled Retry (sy_retry_policy), valid while the
    snapshot it came from is held."""

    def __init__(self, p: Any, snapshot: Any,
                 random: Optional[Callable[[], int]] = None) -> None:
        self._p = p
        self._snapshot = snapshot
        self._random = random
        i = ffi.new("sy_retry_info *")
        lib.sy_retry_policy_info(p, i)
        self.retries = int(i.retries)
        self.first_backoff_ms = int(i.first_backoff_ms)
        self.max_backoff_ms = int(i.max_backoff_ms)
        self.factor = int(i.factor)
        self.based_on_previous = bool(i.based_on_previous)
        self.jitter = float(i.jitter)
        self.timeout_ms = None if i.timeout_ms < 0 else int(i.timeout_ms)

    def next(self, retries_done: int, method: str = "GET",
             outcome: Union[Outcome, str, int] = "success", status: int = 0,
             elapsed_ms: int = 0,
             random: Optional[int] = None) -> Optional[int]:
        """The delay in ms before the next attempt, or None for no retry
        (sy_retry_next). ``random`` (any 64-bit number) draws the jitter;
        None: the router's random callback, else a fresh random number
        (the C call's 0 would draw the same delay every time)."""
        self._snapshot._p()
        if random is None:
            random = (self._random() if self._random is not None
                      else _random.getrandbits(64))
        m = cstr(method)
        ms = ffi.new("sy_str *", (ffi.from_buffer("char[]", m), len(m)))
        d = ffi.new("uint32_t *")
        ok = lib.sy_retry_next(self._p, int(retries_done), ms[0],
                               int(Outcome.of(outcome)), int(status),
                               int(elapsed_ms),
                               int(random) & 0xFFFFFFFFFFFFFFFF, d)
        return int(d[0]) if ok else None


@dataclass(frozen=True)
class BreakerInfo:
    """A breaker's state in a store (sy_breaker_info)."""
    state: str
    calls: int
    failures: int
    slow: int
    state_since_ms: int


def _ratelimit(m: Any, now_ms: int) -> RateLimit:
    rl = ffi.new("sy_ratelimit *")
    err = new_error()
    check(lib.sy_match_ratelimit(m, int(now_ms), rl, err), err)
    if not rl.limited:
        return RateLimit(limited=False, allowed=True)
    hdrs = ffi.new("sy_header[4]")
    buf = ffi.new("char[128]")
    n = lib.sy_ratelimit_headers(rl, hdrs, buf, 128)
    headers = {slice_text(hdrs[i].name): slice_text(hdrs[i].value)
               for i in range(n)}
    return RateLimit(limited=True, allowed=bool(rl.allowed),
                     status=int(rl.status), remaining=int(rl.remaining),
                     replenish_rate=int(rl.replenish_rate),
                     burst_capacity=int(rl.burst_capacity),
                     requested_tokens=int(rl.requested_tokens),
                     key=ffi.string(rl.key, rl.key_len).decode(
                         "utf-8", "replace"),
                     empty_key=bool(rl.empty_key), headers=headers)


def run(match: Match, kind: str, now_ms: int,
        with_c_match: Callable[[Match, Callable[[Any], Any]], Any]) -> Any:
    snap = match._live.snapshot
    if kind == "ratelimit":
        return with_c_match(match, lambda m: _ratelimit(m, now_ms))
    if kind == "breaker":
        def acquire(m: Any) -> BreakerPermit:
            p = ffi.new("sy_breaker_permit *")
            err = new_error()
            check(lib.sy_match_breaker_acquire(m, int(now_ms), p, err), err)
            return BreakerPermit(p, snap, getattr(snap._owner, "clock",
                                                  None))
        return with_c_match(match, acquire)
    p = with_c_match(match, lib.sy_match_retry_policy)
    return None if p == ffi.NULL else RetryPolicy(
        p, snap, getattr(snap._owner, "random", None))


def store_stats(store: Any) -> Dict[str, int]:
    s = ffi.new("sy_policy_stats *")
    lib.sy_policy_store_stats(store, s)
    return {k: int(getattr(s, k)) for k in (
        "slots", "breakers", "buckets_used", "breakers_used", "limited",
        "store_full", "breaker_rejected", "breaker_opened",
        "breaker_half_opened", "breaker_closed")}


def store_breaker(store: Any, name: str) -> Optional[BreakerInfo]:
    bi = ffi.new("sy_breaker_info *")
    err = new_error()
    rc = lib.sy_policy_store_breaker(store, cstr(name), bi, err)
    if rc == lib.SY_ENOTFOUND:
        return None
    check(rc, err)
    return BreakerInfo(_STATES[int(bi.state)], int(bi.calls),
                       int(bi.failures), int(bi.slow), int(bi.state_since_ms))


def _list(arr: Any) -> List[str]:
    out: List[str] = []
    i = 0
    while arr != ffi.NULL and arr[i] != ffi.NULL:
        out.append(text(arr[i]))
        i += 1
    return out


def host_profile(host: str) -> Optional[List[str]]:
    """What one of the project's hosts runs ("gateway", "nginx"), as the
    list it passes as ``host_runs``; None for another name."""
    arr = lib.sy_host_profile(cstr(host))
    return None if arr == ffi.NULL else _list(arr)


def c_host_runs(runs: Union[str, Sequence[str]], keep: List[Any]) -> Any:
    """The NULL-terminated C list of a ``host_runs`` option: a host name
    of :func:`host_profile` or a list of item names (kept alive by
    `keep`)."""
    if isinstance(runs, str):
        profile = host_profile(runs)
        if profile is None:
            raise InvalidArgumentError(
                f"unknown host {runs!r} (gateway or nginx, or a list)")
        runs = profile
    strs = [ffi.new("char[]", cstr(x)) for x in runs]
    arr = ffi.new("char *[]", strs + [ffi.NULL])
    keep.extend(strs)
    keep.append(arr)
    return arr


def host_runs_all() -> List[str]:
    """Every host-run item the library knows (sy_host_runs_all)."""
    return _list(lib.sy_host_runs_all())


__all__ = ["RateLimit", "BreakerPermit", "RetryPolicy", "BreakerInfo",
           "host_profile", "host_runs_all"]
