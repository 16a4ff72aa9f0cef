"""switchyard: Spring Cloud Gateway routes, compiled and matched in C.

Python bindings of libswitchyard (cffi, API mode). The tour::

    import switchyard as sy

    with sy.Router() as router:
        router.add_source("public")
        report = router.apply("public", [
            {"id": "users", "uri": "lb://users",
             "predicates": ["Path=/users/{id}"]}])
        with router.acquire() as snap:
            m = snap.match(method="GET", url="http://gw/users/42")
            print(m.route_id, m.vars["id"])

See docs/python.md for the whole API.
"""
from __future__ import annotations

import logging as _logging

from ._native import ffi as _ffi, lib as _lib
from . import _callbacks  # noqa: F401  (registers the extern "Python" callbacks)
from ._core import (Document, Registry, Snapshot, diff, parse, parse_file,
                    parse_instances)
from ._errors import (BusyError, CallbackAfterPublishError, CallbackError,
                      ClosedError, DuplicateError, ExistsError,
                      InvalidArgumentError, InvalidDocumentError, LimitError,
                      NoInstanceError, NotFoundError, OutOfMemoryError,
                      NotRunError, ParseError, PatternError, ReentrantError,
                      RegexError,
                      SpelError, SwitchyardError, UnknownNameError,
                      ValidationError, code_name, error_for_code, strerror)
from ._policy import (BreakerInfo, BreakerPermit, RateLimit, RetryPolicy,
                      host_profile, host_runs_all)
from ._router import ChangeSet, Router
from ._types import (Action, Changed, Diff, EscapedSlashes, ExplainStep,
                     HostFilter, Instance, InstanceDelta, InstanceOp,
                     InstanceState, Issue, Limits, Match, Metrics, NoMatch,
                     NoMatchReason, Outcome, OutlierOptions,
                     PathNormalization, Report, Request, ResponseOp,
                     ResponseOpKind, Route, Selection, Shadow, ShortcutType,
                     SourceStatus, Target, Upstream, UpstreamKind)

# Library logs go to the "switchyard" logger; like any library, stay quiet
# unless the application configures logging.
_logging.getLogger("switchyard").addHandler(_logging.NullHandler())

#: The version of the libswitchyard this module runs against.
library_version: str = _ffi.string(_lib.sy_version()).decode()
#: The version of the header the binding was compiled against.
header_version: str = "%d.%d.%d" % (_lib.SY_VERSION_MAJOR,
                                    _lib.SY_VERSION_MINOR,
                                    _lib.SY_VERSION_PATCH)
__version__ = library_version


def version() -> str:
    """The library's version string (``sy_version()``)."""
    return library_version


def version_number() -> int:
    """The library's SY_VERSION_NUMBER (MAJOR*10000 + MINOR*100 + PATCH)."""
    return int(_lib.sy_version_number())


__all__ = [
    "Router", "ChangeSet", "Snapshot", "Document", "Registry", "parse", "parse_file",
    "parse_instances",
    "diff", "version", "version_number", "library_version",
    "header_version",
    # values
    "Request", "Match", "Route", "Upstream", "UpstreamKind", "ResponseOp",
    "ResponseOpKind", "HostFilter", "Action", "ExplainStep", "Selection",
    "Shadow",
    "Instance", "InstanceDelta", "InstanceOp", "InstanceState", "Issue",
    "Diff", "Changed", "Report", "Metrics", "Limits", "ShortcutType",
    "Target", "NoMatch", "NoMatchReason", "Outcome", "OutlierOptions",
    "PathNormalization", "EscapedSlashes", "SourceStatus",
    # policies
    "RateLimit", "BreakerPermit", "RetryPolicy", "BreakerInfo",
    "host_profile", "host_runs_all",
    # errors
    "SwitchyardError", "OutOfMemoryError", "InvalidArgumentError",
    "ParseError", "ValidationError", "DuplicateError", "UnknownNameError",
    "RegexError", "PatternError", "SpelError", "NotRunError",
    "InvalidDocumentError", "LimitError", "NotFoundError", "ExistsError", "BusyError",
    "NoInstanceError", "CallbackError", "ClosedError", "ReentrantError",
    "CallbackAfterPublishError", "code_name",
    "error_for_code", "strerror",
]
