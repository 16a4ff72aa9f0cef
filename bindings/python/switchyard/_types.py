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

__all__ = [
    "Action", "ResponseOpKind", "UpstreamKind", "InstanceState",
    "InstanceOp", "ShortcutType", "Changed", "Request", "Upstream", "Route",
    "ResponseOp", "HostFilter", "Match", "ExplainStep", "Selection",
    "Instance", "InstanceDelta", "Issue", "Diff", "Report", "Metrics",
    "Limits", "HeadersLike",
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
class Request:
    """A request to match, described the way a host sees it.

    Give either ``url`` (``http://host/path?query`` or just
    ``/path?query``) or ``path`` and ``query``. ``headers`` is a mapping
    (values may be lists) or a sequence of ``(name, value)`` pairs. The
    host is taken from ``host``, else the URL's authority, else the
    ``Host`` header. ``now`` is a datetime (naive means UTC) or epoch
    milliseconds; None uses the router's clock. ``seed`` pins the Weight
    draws. ``content_length`` None means unknown.
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
class ExplainStep:
    """One route of an explain walk, in rank order."""
    route_id: str
    matched: bool
    failed_predicate: Optional[int]  # index; -1 for a disabled route
    failed_name: Optional[str]       # predicate name, or "disabled"


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
        from ._errors import error_for_code
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

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``switchyard diff --json``."""
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "updated": [{"id": rid, "changed": list(changed.names())}
                        for rid, changed in self.updated],
            "unchanged": self.unchanged,
        }

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.updated)


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
