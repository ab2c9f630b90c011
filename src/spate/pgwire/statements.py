"""Statements the session answers itself: transactions, SET/SHOW, cursors, COPY, PREPARE…

They are recognised by the SQL layer (:mod:`spate.sql.session_statements`) from the tokens the
statement text was split into, once; :func:`classify` gives the typed statement, or ``None``
for one the catalog emulation or the engine answers. spate's own SHOW commands (``SHOW
TABLES``, ``SHOW COLUMNS FROM t``…) are left to the engine.
"""

from __future__ import annotations

from typing import Final

from spate.pgwire.errors import PgError
from spate.sql import Parsed
from spate.sql.copy_statement import CopyFrom, CopyTo
from spate.sql.session_statements import (
    Begin,
    Close,
    Commit,
    Deallocate,
    Declare,
    Discard,
    Execute,
    Fetch,
    Listen,
    Prepare,
    Release,
    Rollback,
    Savepoint,
    SessionStatement,
    Set,
    Show,
    TransactionControl,
    recognise,
)

__all__ = [
    "REPORTED",
    "Begin",
    "Close",
    "Commit",
    "CopyFrom",
    "CopyTo",
    "Deallocate",
    "Declare",
    "Discard",
    "Execute",
    "Fetch",
    "Listen",
    "Prepare",
    "Release",
    "Rollback",
    "Savepoint",
    "SessionStatement",
    "Set",
    "Show",
    "TransactionControl",
    "classify",
    "duration_seconds",
]

# Variables reported to the client in ParameterStatus when they change.
REPORTED: Final = frozenset(
    [
        "application_name",
        "client_encoding",
        "datestyle",
        "integer_datetimes",
        "intervalstyle",
        "is_superuser",
        "server_encoding",
        "server_version",
        "session_authorization",
        "standard_conforming_strings",
        "timezone",
    ]
)

_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def classify(parsed: Parsed | None) -> SessionStatement | None:
    """The session statement ``parsed`` is (``None``: empty, or one to plan)."""
    return None if parsed is None else recognise(parsed)


def duration_seconds(text: str) -> float:
    """A FETCH timeout (``'1s'``, ``'500ms'``, ``'2'`` seconds) in seconds."""
    value = text.strip()
    digits = len(value) - len(value.lstrip("0123456789."))
    number, unit = value[:digits], value[digits:].strip().lower() or "s"
    try:
        n = float(number)
    except ValueError:
        n = -1.0
    if n < 0 or unit not in _UNITS:
        raise PgError("22023", f"invalid timeout {text!r}: expected a duration such as '1s'")
    return n * _UNITS[unit]
