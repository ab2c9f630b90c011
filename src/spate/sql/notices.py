"""Notices: what a statement tells its client without failing (PostgreSQL's ``NOTICE``), and
the one the SQL front end raises itself, for an identifier longer than PostgreSQL's
``NAMEDATALEN - 1`` (63 bytes): it is truncated to 63 bytes (never inside a character) with
``NOTICE 42622 identifier "…" will be truncated to "…"``, once per occurrence in the text, as
PostgreSQL's lexer does.

Whoever runs statements collects their notices with :func:`collecting`; a notice raised while
nobody collects is dropped (a describe that plans a statement again, say).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final

MAX_IDENTIFIER_BYTES: Final = 63
"""PostgreSQL's ``NAMEDATALEN - 1``: what the server reports as ``max_identifier_length``."""

NAME_TOO_LONG: Final = "42622"


@dataclass(frozen=True, slots=True)
class Notice:
    sqlstate: str
    message: str


_collector: ContextVar[list[Notice] | None] = ContextVar("spate_sql_notices", default=None)


@contextmanager
def collecting(into: list[Notice]) -> Iterator[list[Notice]]:
    """Append the notices raised in this context (this thread) to ``into``."""
    token = _collector.set(into)
    try:
        yield into
    finally:
        _collector.reset(token)


def notice(sqlstate: str, message: str) -> None:
    out = _collector.get()
    if out is not None:
        out.append(Notice(sqlstate, message))


def truncate_identifier(name: str) -> str:
    """``name`` cut to 63 bytes of UTF-8 (a character that would straddle the limit goes)."""
    encoded = name.encode("utf-8")
    if len(encoded) <= MAX_IDENTIFIER_BYTES:
        return name
    return encoded[:MAX_IDENTIFIER_BYTES].decode("utf-8", errors="ignore")


def warn_if_truncated(name: str) -> None:
    """The notice for an identifier (as case folding left it) that will be truncated."""
    short = truncate_identifier(name)
    if short != name:
        notice(NAME_TOO_LONG, f'identifier "{name}" will be truncated to "{short}"')
