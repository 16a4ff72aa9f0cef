"""Exceptions: one class per family of switchyard result codes.

Every fallible C call fills an ``sy_error``; the binding turns it into an
instance of the class registered for its code, keeping the code, the
library's message, the JSON path and, for syntax errors, line and column.
"""
from __future__ import annotations

from typing import Any, Optional

from ._native import ffi, lib

__all__ = [
    "SwitchyardError", "OutOfMemoryError", "InvalidArgumentError",
    "ParseError", "ValidationError", "DuplicateError", "UnknownNameError",
    "RegexError", "PatternError", "SpelError", "NotRunError",
    "InvalidDocumentError",
    "LimitError", "NotFoundError", "ExistsError", "BusyError",
    "NoInstanceError", "CallbackError", "ClosedError", "ReentrantError",
    "CallbackAfterPublishError", "error_for_code",
]

_CODE_NAMES = {
    0: "SY_OK", -1: "SY_ENOMEM", -2: "SY_EINVAL", -3: "SY_ESYNTAX",
    -4: "SY_ETYPE", -5: "SY_EMISSING", -6: "SY_EDUPLICATE", -7: "SY_ERANGE",
    -8: "SY_EURI", -9: "SY_EUNKNOWN", -10: "SY_EARG", -11: "SY_ESPEL",
    -12: "SY_ELIMIT", -13: "SY_EREGEX", -14: "SY_EPATTERN",
    -15: "SY_ENOTFOUND", -16: "SY_EEXIST", -17: "SY_EBUSY",
    -18: "SY_ENOINSTANCE", -19: "SY_ECALLBACK", -20: "SY_EINVALIDDOC",
    -21: "SY_EREENTRANT", -22: "SY_ETOOSMALL", -23: "SY_ENOTRUN",
}


def code_name(code: int) -> str:
    """The SY_E* name of a result code ("SY_EREGEX"), or "SY_E<n>"."""
    return _CODE_NAMES.get(code, f"SY_E{code}")


def strerror(code: int) -> str:
    """The library's static description of a code."""
    p = lib.sy_strerror(code)
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""


class SwitchyardError(Exception):
    """Base class of every error reported by libswitchyard.

    Attributes: ``code`` (negative ``SY_E*`` value), ``code_name``
    ("SY_EREGEX"), ``message`` (the library's text), ``path`` (JSON path such
    as ``routes[0].predicates[0].args.regexp``, "" when not about one
    place), ``line``/``column`` (1-based, JSON syntax errors only, else 0),
    ``offset`` (byte offset in the document or in the pattern),
    ``report`` (the :class:`Report` of a failed apply or commit, when there
    is one) and ``change`` (for a failed commit: the index of the staged
    change that failed, else None).
    """

    default_code = -2

    def __init__(self, message: str = "", *, code: Optional[int] = None,
                 path: str = "", line: int = 0, column: int = 0,
                 offset: int = 0, report: Any = None,
                 change: Optional[int] = None) -> None:
        self.code: int = self.default_code if code is None else code
        self.message: str = message or strerror(self.code)
        self.path: str = path
        self.line: int = line
        self.column: int = column
        self.offset: int = offset
        self.report: Any = report
        self.change: Optional[int] = change
        super().__init__(self.__str__())

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    def __str__(self) -> str:
        where = self.path
        if self.line:
            pos = f"line {self.line}, column {self.column}"
            where = f"{where} ({pos})" if where else pos
        return f"{where}: {self.message}" if where else self.message

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code_name}, "
                f"message={self.message!r}, path={self.path!r})")


class OutOfMemoryError(SwitchyardError, MemoryError):
    """SY_ENOMEM."""
    default_code = -1


class InvalidArgumentError(SwitchyardError, ValueError):
    """SY_EINVAL: a bad argument to an API call."""
    default_code = -2


class ParseError(SwitchyardError, ValueError):
    """SY_ESYNTAX: JSON syntax error or trailing garbage (line, column)."""
    default_code = -3


class ValidationError(SwitchyardError, ValueError):
    """A document that is valid JSON but not a valid route document."""
    default_code = -10


class DuplicateError(ValidationError):
    """SY_EDUPLICATE: a route id already used in the document or a source."""
    default_code = -6


class UnknownNameError(ValidationError):
    """SY_EUNKNOWN: an unknown predicate or filter name."""
    default_code = -9


class RegexError(ValidationError):
    """SY_EREGEX: a regular expression that does not compile."""
    default_code = -13


class PatternError(ValidationError):
    """SY_EPATTERN: a path or host pattern that does not compile."""
    default_code = -14


class SpelError(ValidationError):
    """SY_ESPEL: a SpEL #{...} value (not supported)."""
    default_code = -11


class NotRunError(ValidationError):
    """SY_ENOTRUN: a host-run filter, uri scheme or metadata key the host
    does not run (Router ``host_runs``)."""
    default_code = -23


class InvalidDocumentError(ValidationError):
    """SY_EINVALIDDOC: lenient mode, and no route of the document is valid."""
    default_code = -20


class LimitError(SwitchyardError):
    """SY_ELIMIT: a configured limit was exceeded."""
    default_code = -12


class NotFoundError(SwitchyardError, LookupError):
    """SY_ENOTFOUND: no such source, route, service or version."""
    default_code = -15


class ExistsError(SwitchyardError):
    """SY_EEXIST: already exists (e.g. a source name)."""
    default_code = -16


class BusyError(SwitchyardError):
    """SY_EBUSY: too many retired snapshots are still held, or a source
    to remove is still in use (live routes, a running notify)."""
    default_code = -17


class NoInstanceError(SwitchyardError):
    """SY_ENOINSTANCE: no instance is eligible for this request."""
    default_code = -18


class CallbackError(SwitchyardError):
    """SY_ECALLBACK: a host callback reported failure."""
    default_code = -19


class ReentrantError(SwitchyardError, RuntimeError):
    """SY_EREENTRANT: a writer call (apply, upsert, commit, ...) made from
    inside a router callback (on_event, route_attach, ...). The library
    refuses it at once instead of deadlocking; make the change after the
    call that ran the callback returns."""
    default_code = -21


class ClosedError(InvalidArgumentError):
    """Use of a router, snapshot or document after close()/release()."""


class CallbackAfterPublishError(Exception):
    """A Python callback raised while a writer call ran, but the change WAS
    published: the call succeeded.

    Raised instead of the callback's exception by apply, upsert, remove,
    set_enabled, rollback, notify, set_instances, update_instances and
    commit when, for instance, an ``on_event`` handler (which runs after
    the publish) or a ``route_attach`` callback raised. It is deliberately
    not a :class:`SwitchyardError`, so that ``except SwitchyardError``
    around a writer call only catches changes that were NOT published.

    Attributes: ``report`` (the applied :class:`Report`, None for notify)
    and ``error`` (the callback's exception, also ``__cause__``).
    """

    def __init__(self, error: BaseException, report: Any = None) -> None:
        self.error = error
        self.report = report
        super().__init__(
            f"the change was published, but a callback raised "
            f"{type(error).__name__}: {error}")


_CLASSES: dict[int, type[SwitchyardError]] = {
    -1: OutOfMemoryError, -2: InvalidArgumentError, -3: ParseError,
    -4: ValidationError, -5: ValidationError, -6: DuplicateError,
    -7: ValidationError, -8: ValidationError, -9: UnknownNameError,
    -10: ValidationError, -11: SpelError, -12: LimitError, -13: RegexError,
    -14: PatternError, -15: NotFoundError, -16: ExistsError, -17: BusyError,
    -18: NoInstanceError, -19: CallbackError, -20: InvalidDocumentError,
    -21: ReentrantError, -23: NotRunError,
}


def error_for_code(code: int) -> type[SwitchyardError]:
    """The exception class used for a result code."""
    return _CLASSES.get(code, SwitchyardError)


def _text(buf: Any) -> str:
    return ffi.string(buf).decode("utf-8", "replace")


def from_c(rc: int, err: Any, report: Any = None) -> SwitchyardError:
    """Build the exception for a failed call from its rc and sy_error."""
    code = err.code if err is not None and err.code < 0 else rc
    change = getattr(report, "failed_change", None)
    if err is None:
        return error_for_code(code)("", code=code, report=report,
                                    change=change)
    return error_for_code(code)(
        _text(err.message), code=code, path=_text(err.path), line=err.line,
        column=err.column, offset=err.offset, report=report, change=change)
