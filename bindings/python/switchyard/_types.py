"""Plain value types of the binding: requests in, immutable results out.

Everything here is pure Python and owns its data: a Route, a Match or a
Report stays valid after the snapshot, document or report it was read from
is released.
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union

from ._errors import InvalidArgumentError, error_for_code

__all__ = [
    "Action", "ResponseOpKind", "UpstreamKind", "InstanceState",
    "InstanceOp", "ShortcutType", "Changed", "Request", "Upstream", "Route",
    "ResponseOp", "HostFilter", "Match", "ExplainStep", "Selection",
    "Instance", "InstanceDelta", "Issue", "Diff", "Report", "Metrics",
    "Limits", "HeadersLike", "NoMatchReason", "NoMatch", "Outcome",
    "PathNormalization", "EscapedSlashes", "OutlierOptions", "Target",
    "SourceStatus",
]

HeadersLike = Union[Mapping[str, Union[str, Sequence[str]]],
                    Iterable[Tuple[str, str]]]



def _empty_map() -> Mapping[str, str]:
    return MappingProxyType({})


class Action(enum.IntEnum):
    """What the host does with a matched request (sy_action)."""
    PROXY = 0
    RESPOND = 1
    REDIRECT = 2


class ResponseOpKind(enum.IntEnum):
    """sy_response_op_kind."""
    ADD = 0
    ADD_IF_ABSENT = 1
    SET = 2
    REMOVE = 3
    DEDUPE = 4
    REWRITE = 5
    REWRITE_LOCATION = 6


class UpstreamKind(enum.IntEnum):
    """sy_upstream_kind."""
    URL = 0
    SERVICE = 1
    FORWARD = 2
    NONE = 3


class InstanceState(enum.IntEnum):
    """sy_instance_state."""
    UP = 0
    DRAINING = 1
    DOWN = 2


class InstanceOp(enum.IntEnum):
    """sy_instance_op."""
    ADD = 0
    REMOVE = 1
    WEIGHT = 2
    STATE = 3


class ShortcutType(enum.IntEnum):
    """How shortcut args map to fields for a host factory."""
    DEFAULT = 0
    GATHER_LIST = 1
    GATHER_LIST_TAIL_FLAG = 2


class NoMatchReason(enum.IntEnum):
    """Why a request matched no route (sy_nomatch)."""
    NONE = 0       # a route matched
    NO_ROUTE = 1   # 404
    METHOD = 2     # a route's other predicates held, not its Method: 405
    BAD_PATH = 3   # the path was rejected by normalisation: 400
    BUDGET = 4     # the request exhausted its CPU budget

    @property
    def status(self) -> int:
        """The HTTP status to answer with (0 for NONE)."""
        return {0: 0, 1: 404, 2: 405, 3: 400, 4: 503}[int(self)]


class Outcome(enum.IntEnum):
    """The outcome of one attempt to an upstream (sy_outcome); also
    accepted as "success", "connect_failure", "5xx" or "timeout"."""
    SUCCESS = 0
    CONNECT_FAILURE = 1
    HTTP_5XX = 2
    TIMEOUT = 3

    @classmethod
    def of(cls, value: Union["Outcome", int, str]) -> "Outcome":
        if isinstance(value, str):
            key = value.strip().lower().replace("-", "_")
            names = {"success": cls.SUCCESS, "ok": cls.SUCCESS,
                     "connect_failure": cls.CONNECT_FAILURE,
                     "5xx": cls.HTTP_5XX, "http_5xx": cls.HTTP_5XX,
                     "timeout": cls.TIMEOUT}
            if key not in names:
                raise ValueError(f"unknown outcome {value!r}: expected one "
                                 f"of success, connect_failure, 5xx, timeout")
            return names[key]
        return cls(value)


class PathNormalization(enum.IntEnum):
    """Request path normalisation before matching (sy_path_normalization):
    NORMALIZE (default, the safe choice) removes dot segments and refuses a
    path that climbs above the root; AS_IS matches the path as received."""
    NORMALIZE = 0
    AS_IS = 1


class EscapedSlashes(enum.IntEnum):
    """What %2F / %5C in a request path become (sy_escaped_slashes)."""
    KEEP = 0    # stay encoded, part of one segment (default)
    REJECT = 1  # the request does not match (NoMatchReason.BAD_PATH)
    DECODE = 2  # decoded to '/' or '\\' before normalisation


def _enum_of(cls: Any, value: Any) -> Any:
    if isinstance(value, str):
        return cls[value.strip().upper().replace("-", "_")]
    return cls(value)


class Changed(enum.IntFlag):
    """SY_CHANGED_* bits of an updated route in a diff."""
    PREDICATES = 1 << 0
    FILTERS = 1 << 1
    URI = 1 << 2
    METADATA = 1 << 3
    ORDER = 1 << 4

    def names(self) -> Tuple[str, ...]:
        """Lower-case names of the set bits, in bit order."""
        return tuple(str(m.name).lower() for m in Changed
                     if m in self and m.name)


@dataclass(frozen=True)
class Limits:
    """Document limits; 0 takes the library's default."""
    max_document_bytes: int = 0
    max_routes: int = 0
    max_string_bytes: int = 0
    max_depth: int = 0


@dataclass(frozen=True)
class OutlierOptions:
    """Passive health (sy_outlier_options), as Envoy's outlier detection:
    an instance failing ``consecutive_failures`` times in a row is ejected
    for ``base_ejection_ms`` times its ejection count, at most
    ``max_ejection_ms``; at most ``max_ejected_percent`` of a service is
    ejected at once. 0 takes the library's default (5, 30000, 300000, 50).
    """
    consecutive_failures: int = 0
    base_ejection_ms: int = 0
    max_ejection_ms: int = 0
    max_ejected_percent: int = 0
    disabled: bool = False


@dataclass(frozen=True)
class Request:
    """A request to match, described the way a host sees it.

    Give either ``url`` (``http://host/path?query`` or just
    ``/path?query``) or ``path`` and ``query``. ``headers`` is a mapping
    (values may be lists) or a sequence of ``(name, value)`` pairs. The
    host is taken from ``host``, else the URL's authority, else the
    ``Host`` header. ``now`` is a datetime (naive means UTC) or epoch
    milliseconds; None uses the router's clock. ``seed`` pins the Weight
    draws. ``content_length`` None means unknown. ``principal`` is the
    authenticated principal's name (RequestRateLimiter's default key).
    """
    method: str = "GET"
    url: Optional[str] = None
    path: Optional[str] = None
    query: Optional[str] = None
    headers: HeadersLike = ()
    host: Optional[str] = None
    scheme: Optional[str] = None
    remote_addr: Optional[str] = None
    now: Union[datetime, int, None] = None
    seed: int = 0
    content_length: Optional[int] = None
    principal: Optional[str] = None


@dataclass(frozen=True)
class Upstream:
    """Where a route sends requests (sy_upstream)."""
    kind: UpstreamKind
    scheme: str
    host: str
    port: int
    path: str


@dataclass(frozen=True)
class Route:
    """A compiled route, copied out of a document or snapshot."""
    id: str
    uri: str
    order: int
    fingerprint: int
    disabled: bool
    upstream: Upstream
    metadata: Mapping[str, str] = field(default_factory=_empty_map, hash=False)
    predicates: Tuple[str, ...] = ()
    canonical: str = field(default="", repr=False, compare=False)
    source: Optional[str] = None
    #: the route's small integer key in its router (array index), or None
    #: outside a router (documents)
    key: Optional[int] = field(default=None, compare=False)
    #: what the router's ``route_attach`` returned for this route
    host_data: Any = field(default=None, repr=False, compare=False)
    #: the host-run items the route uses ("Retry", "forward:", ...), in
    #: route order (sy_route_host_runs)
    host_runs: Tuple[str, ...] = field(default=(), compare=False)
    #: the ``connect-timeout`` / ``response-timeout`` metadata as Spring
    #: Cloud Gateway reads it (sy_route_timeout): milliseconds, ``math.inf``
    #: for no limit, None when the route does not set it (the host's own)
    connect_timeout_ms: Optional[float] = field(default=None, compare=False)
    response_timeout_ms: Optional[float] = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The canonical form parsed back into a dict."""
        return json.loads(self.canonical) if self.canonical else {}


@dataclass(frozen=True)
class ResponseOp:
    """One operation on the upstream response (sy_response_op)."""
    kind: ResponseOpKind
    name: str
    value: str
    arg: str


@dataclass(frozen=True)
class HostFilter:
    """A filter the host runs itself (stateful or host-registered)."""
    name: str
    args: Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class Match:
    """The outcome of matching one request: the route and the filter plan."""
    route_id: str
    upstream: Upstream
    action: Action
    status: int
    redirect: Optional[str]
    path: str
    query: str
    headers: Tuple[Tuple[str, str], ...]
    preserve_host: bool
    response_ops: Tuple[ResponseOp, ...]
    host_filters: Tuple[HostFilter, ...]
    vars: Mapping[str, str] = field(default_factory=_empty_map, hash=False)
    #: the route's key in its router (an array index), see Route.key
    route_key: Optional[int] = field(default=None, compare=False)
    #: what ``route_attach`` returned for the matched route (no lookup)
    host_data: Any = field(default=None, repr=False, compare=False)
    # the C match, while it can still be used (see target())
    _live: Any = field(default=None, repr=False, compare=False)

    def __bool__(self) -> bool:
        return True

    @property
    def matched(self) -> bool:
        return True

    def target(self, exclude: Iterable[str] = ()) -> "Target":
        """Everything needed to send this request upstream, in one call
        (``sy_match_target``): for ``lb://`` routes an instance is chosen,
        skipping the ids in ``exclude`` (the ones already tried for this
        request) and the instances ejected by passive health.

        The snapshot the match came from must still be held (ClosedError
        otherwise). Raises NoInstanceError (answer 503) when no instance is
        eligible, InvalidArgumentError when the action is not PROXY.
        """
        if self._live is None:
            raise InvalidArgumentError(
                "this Match was not made by a snapshot: it has no target")
        return self._live.target(self, exclude)

    def ratelimit(self, now_ms: int = 0) -> "Any":
        """Check the route's RequestRateLimiters against the router's local
        buckets at ``now_ms`` (0: the router's clock), taking tokens
        (``sy_match_ratelimit``): a :class:`switchyard.RateLimit`."""
        return self._policy("ratelimit", now_ms)

    def breaker(self, now_ms: int = 0) -> "Any":
        """Ask the route's CircuitBreaker for permission to call upstream
        (``sy_match_breaker_acquire``): a :class:`switchyard.BreakerPermit`
        whose ``record()`` reports the outcome."""
        return self._policy("breaker", now_ms)

    def retry_policy(self) -> "Any":
        """The route's Retry as a :class:`switchyard.RetryPolicy`, or
        None."""
        return self._policy("retry", 0)

    def _policy(self, kind: str, now_ms: int) -> Any:
        if self._live is None:
            raise InvalidArgumentError(
                "this Match was not made by a snapshot: it has no policies")
        return self._live.policy(self, kind, now_ms)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (used by ``python3 -m switchyard match --json``)."""
        return {
            "route": self.route_id,
            "action": self.action.name.lower(),
            "status": self.status,
            "redirect": self.redirect,
            "upstream": {"kind": self.upstream.kind.name.lower(),
                         "scheme": self.upstream.scheme,
                         "host": self.upstream.host,
                         "port": self.upstream.port,
                         "path": self.upstream.path},
            "vars": dict(self.vars),
            "path": self.path,
            "query": self.query,
            "headers": [list(h) for h in self.headers],
            "preserve_host": self.preserve_host,
            "response_ops": [{"kind": op.kind.name.lower(), "name": op.name,
                              "value": op.value, "arg": op.arg}
                             for op in self.response_ops],
            "host_filters": [{"name": f.name, "args": [list(a) for a in f.args]}
                             for f in self.host_filters],
        }


@dataclass(frozen=True)
class NoMatch:
    """Why :meth:`Snapshot.resolve` found no route. Falsy, so that
    ``if not result:`` reads as "no match"; ``status`` is the HTTP status
    to answer with and ``allow`` the Allow header value of a 405
    ("GET, HEAD"), "" otherwise."""
    reason: NoMatchReason
    allow: str = ""

    def __bool__(self) -> bool:
        return False

    @property
    def matched(self) -> bool:
        return False

    @property
    def status(self) -> int:
        return self.reason.status

    @property
    def allowed_methods(self) -> Tuple[str, ...]:
        """The allowed methods as a tuple (405 only)."""
        return tuple(m.strip() for m in self.allow.split(",") if m.strip())


@dataclass(frozen=True)
class Target:
    """Where and what to send for a matched request (sy_target).

    ``host``/``port`` are what to connect to (the chosen instance for
    ``lb://``), ``host_header`` the Host header to send (the upstream's
    authority, or the client's with PreserveHostHeader), ``headers`` the
    request headers after filters without Host, ``path``/``query`` the
    request line to send. For ``lb://`` routes ``service``, ``instance_id``,
    ``version``, ``zone`` and ``metadata`` name the chosen instance (None /
    empty otherwise). Pass it to :meth:`Router.report_outcome` after the
    attempt, while the snapshot is still held.
    """
    kind: UpstreamKind
    scheme: str
    host: str
    port: int
    path: str
    query: str
    host_header: str
    headers: Tuple[Tuple[str, str], ...]
    service: Optional[str] = None
    instance_id: Optional[str] = None
    version: Optional[str] = None
    zone: Optional[str] = None
    metadata: Mapping[str, str] = field(default_factory=_empty_map,
                                        hash=False)
    route_id: str = ""
    _health: Any = field(default=None, repr=False, compare=False)
    _snapshot: Any = field(default=None, repr=False, compare=False)

    @property
    def url(self) -> str:
        """``scheme://host:port/path?query`` to send to."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        q = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{host}:{self.port}{self.path}{q}"


@dataclass(frozen=True)
class ExplainStep:
    """One route of an explain walk, in rank order."""
    route_id: str
    matched: bool
    failed_predicate: Optional[int]  # index; -1 for a disabled route
    failed_name: Optional[str]       # predicate name, or "disabled"


@dataclass(frozen=True)
class Shadow:
    """A route no request can reach (Document.shadowed, Snapshot.shadowed):
    routes ranked above take every request it matches (shadowed_by, in
    rank order), or, with shadowed_by empty, it matches no request at all."""
    route_id: str
    rank: int
    position: int                  # index in its document's routes array
    path: str                      # "routes[1]" (documents), "" (snapshots)
    shadowed_by: Tuple[str, ...]
    shadowed_by_paths: Tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Selection:
    """The instance chosen for an lb:// route."""
    route_id: str
    id: str
    host: str
    port: int
    scheme: str
    service: str


@dataclass(frozen=True)
class Instance:
    """A service instance as the host describes it."""
    id: str
    host: str = ""
    port: int = 0
    secure: bool = False
    weight: int = 1
    state: InstanceState = InstanceState.UP
    metadata: Mapping[str, str] = field(default_factory=_empty_map, hash=False)


@dataclass(frozen=True)
class InstanceDelta:
    """One change to a service's instance list."""
    op: InstanceOp
    instance: Instance

    @classmethod
    def add(cls, instance: Instance) -> "InstanceDelta":
        return cls(InstanceOp.ADD, instance)

    @classmethod
    def remove(cls, instance_id: str) -> "InstanceDelta":
        return cls(InstanceOp.REMOVE, Instance(instance_id))

    @classmethod
    def weight(cls, instance_id: str, weight: int) -> "InstanceDelta":
        return cls(InstanceOp.WEIGHT, Instance(instance_id, weight=weight))

    @classmethod
    def state(cls, instance_id: str, state: InstanceState) -> "InstanceDelta":
        return cls(InstanceOp.STATE,
                   Instance(instance_id, state=InstanceState(state)))


@dataclass(frozen=True)
class Issue:
    """An error reported without failing the call (lenient mode)."""
    code: int
    code_name: str
    message: str
    path: str
    line: int = 0
    column: int = 0
    offset: int = 0

    def exception(self) -> Exception:
        """The exception this issue would have raised in strict mode."""
        return error_for_code(self.code)(
            self.message, code=self.code, path=self.path, line=self.line,
            column=self.column, offset=self.offset)


@dataclass(frozen=True)
class Diff:
    """A three-way diff of routes by id and fingerprint."""
    added: Tuple[str, ...]
    removed: Tuple[str, ...]
    updated: Tuple[Tuple[str, Changed], ...]
    unchanged: int
    # kept routes whose rank moved past another (not updated: same
    # definition, another route now matches first); new rank order
    reordered: Tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``switchyard diff --json``."""
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "updated": [{"id": rid, "changed": list(changed.names())}
                        for rid, changed in self.updated],
            "reordered": list(self.reordered),
            "unchanged": self.unchanged,
        }

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.updated or
                    self.reordered)


@dataclass(frozen=True)
class Report:
    """What an apply, route change or instance change did."""
    source: Optional[str]
    version: Optional[str]
    skipped: bool
    generation: int
    diff: Optional[Diff]
    parse_us: int
    publish_us: int
    issues: Tuple[Issue, ...]
    instances_added: Tuple[str, ...] = ()
    instances_removed: Tuple[str, ...] = ()
    instances_changed: Tuple[str, ...] = ()
    #: the service of an instance change
    service: Optional[str] = None
    #: applied although its version equals the live one (bytes differ):
    #: the publisher forgot to bump the version
    version_not_bumped: bool = False
    #: a commit's report: one part per staged change, in staging order
    parts: Tuple["Report", ...] = ()
    #: a failed commit's report: the index of the change that failed
    failed_change: Optional[int] = None


@dataclass(frozen=True)
class SourceStatus:
    """The status of one config source (sy_source_status)."""
    name: str
    version: Optional[str]   # live document's version, None when none
    applied: bool            # a document has been applied
    checksum: int
    fingerprint: int
    routes: int
    last_apply_ms: int       # epoch ms of the last attempt, 0 if none
    last_result: int         # 0 or the SY_E* code of the last attempt
    last_error: Optional[Issue]  # the last failed attempt's error
    applied_count: int
    skipped_count: int
    failed_count: int

    @property
    def ok(self) -> bool:
        return self.last_result == 0


@dataclass(frozen=True)
class Metrics:
    """sy_metrics: publication counters of a router."""
    generation: int
    publishes: int
    live_snapshots: int
    retired_snapshots: int
    reclaimed_snapshots: int
    retired_bytes: int
    oldest_retired_age_ms: int
    routes: int
    # since 0.2
    commits: int = 0
    failed_commits: int = 0
    skipped_applies: int = 0
    instance_updates: int = 0
    services: int = 0
    instances: int = 0
    ejections: int = 0
    outcomes: int = 0
    fingerprint: int = 0
