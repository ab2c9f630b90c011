"""SQLSTATE codes for spate's errors, and the error the server raises itself.

An exception that carries a ``sqlstate`` attribute (a five-character string: its class's, as
spate's error classes declare it, or its own) is sent with that code; otherwise the code comes
from the built-in it mixes in, then from its kind (usage ``42000``, location ``58030``).
Anything that is not a :class:`~spate.errors.SpateError` is ``XX000`` (internal error) and is
logged by the session.
"""

from __future__ import annotations

import asyncio
from typing import Final

from sqlglot.errors import ParseError

from spate.errors import LocationError, SpateError, UsageError


class PgError(SpateError):
    """An error the server answers with a given SQLSTATE (and, when fatal, a closed socket)."""

    def __init__(self, sqlstate: str, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.fatal = fatal


SYNTAX_ERROR: Final = "42601"
UNDEFINED_TABLE: Final = "42P01"
UNDEFINED_COLUMN: Final = "42703"
UNDEFINED_OBJECT: Final = "42704"
FEATURE_NOT_SUPPORTED: Final = "0A000"
INVALID_TEXT: Final = "22P02"
QUERY_CANCELED: Final = "57014"
ADMIN_SHUTDOWN: Final = "57P01"
TOO_MANY_CONNECTIONS: Final = "53300"
PROTOCOL_VIOLATION: Final = "08P01"
PROGRAM_LIMIT: Final = "54000"
INVALID_PASSWORD: Final = "28P01"  # noqa: S105 (a SQLSTATE)
INVALID_AUTHORIZATION: Final = "28000"
NO_ACTIVE_TRANSACTION: Final = "25P01"
IN_FAILED_TRANSACTION: Final = "25P02"
INVALID_CURSOR: Final = "34000"
INVALID_STATEMENT: Final = "26000"
DUPLICATE_STATEMENT: Final = "42P05"
DUPLICATE_CURSOR: Final = "42P03"
INTERNAL_ERROR: Final = "XX000"

_BY_BUILTIN: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (ZeroDivisionError, "22012"),
    (OverflowError, "22003"),
    (ArithmeticError, "22000"),
    (NotImplementedError, FEATURE_NOT_SUPPORTED),
    (KeyError, UNDEFINED_OBJECT),
    (TypeError, "42804"),
    (PermissionError, "42501"),
    (TimeoutError, QUERY_CANCELED),
    (ValueError, "22023"),
)


def sqlstate_of(e: BaseException) -> str:
    """``e``'s SQLSTATE: the code it carries (its own, or its class's ``sqlstate``), else its
    kind's (module docs). Never read from the class's name or the message."""
    code = getattr(e, "sqlstate", None)
    if isinstance(code, str) and len(code) == 5:
        return code
    if isinstance(e, asyncio.CancelledError):
        return QUERY_CANCELED
    if isinstance(e, RecursionError):
        return "54001"  # statement too complex (too deep to follow), never an internal error
    return class_sqlstate(type(e))


def class_sqlstate(cls: type[BaseException]) -> str:
    """The SQLSTATE of an error of class ``cls`` that carries none of its own."""
    code = getattr(cls, "sqlstate", None)
    if isinstance(code, str) and len(code) == 5:
        return code
    if issubclass(cls, (SyntaxError, ParseError)):
        return SYNTAX_ERROR
    if issubclass(cls, SpateError):
        for builtin, found in _BY_BUILTIN:
            if issubclass(cls, builtin):
                return found
        if issubclass(cls, LocationError):
            return "58030"
        if issubclass(cls, UsageError):
            return "42000"
    return INTERNAL_ERROR
