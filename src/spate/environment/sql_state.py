"""What SQL keeps between statements: a session's settings (:class:`Session`) and its open
transaction block (:class:`Block`). What SQL keeps about objects is in the catalog
(:mod:`spate.environment.definitions`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa

from spate.environment.read_holds import ReadHolds
from spate.environment.transaction import Transaction
from spate.plan.recursive import DEFAULT_MAX_ITERATIONS
from spate.repr.types import Row
from spate.sql.notices import Notice
from spate.sql.statements import Statement

if TYPE_CHECKING:
    pass


Result: TypeAlias = pa.Table | Iterator[list[tuple[int, Row, int]]] | None


ACCEPTED_SETTINGS = {
    "datestyle": "ISO, MDY",
    "timezone": "UTC",
    "extra_float_digits": "1",
    "client_encoding": "UTF8",
    "application_name": "",
    "search_path": "public",
    "statement_timeout": "0",
    "standard_conforming_strings": "on",
    "client_min_messages": "notice",
}


@dataclass
class Block:
    """An open transaction block (``BEGIN`` … ``COMMIT``/``ROLLBACK``), as Materialize runs
    one: its first statement makes it a read block (SELECT, SUBSCRIBE: every read at the
    timestamp ``read_ts`` chosen at the first), a write block (INSERT, UPDATE, DELETE: buffered
    in ``writes`` and committed together at COMMIT) or a DDL block (its DDL statements,
    ``ddl``, carried out at COMMIT). ``failed``: a statement failed, and every statement until
    COMMIT or ROLLBACK is refused (25P02); COMMIT then rolls back."""

    writes: Transaction
    kind: str | None = None  # read | write | ddl
    read_ts: int | None = None
    holds: ReadHolds | None = None
    """What holds every object at ``read_ts`` until the block ends (:mod:`.read_holds`)."""
    ddl: list[Statement] = field(default_factory=list)
    """The DDL statements, carried out at COMMIT (:mod:`.sql_ddl_block`)."""
    failed: bool = False
    savepoints: list[tuple[str, tuple[object, str | None, list[Statement]]]] = field(
        default_factory=list
    )
    """The savepoints, oldest first: each name and what the block held then (its buffered
    writes, its kind, its DDL statements)."""


@dataclass
class Session:
    """Per-connection settings: the cluster reads and new objects use, the read isolation,
    whether reads wait for real-time recency (``SET real_time_recency = on``)."""

    cluster: str | None = None
    isolation: str = "strict serializable"
    real_time_recency: bool = False
    recursion_limit: int = DEFAULT_MAX_ITERATIONS
    """The rounds a WITH RECURSIVE planned in this session may take (``SET recursion_limit``);
    a view keeps the limit it was created with."""
    small_reads: bool = True
    """Whether a one-off read over small inputs may be evaluated in the environment
    (:mod:`spate.environment.small_reads`); ``False``: every read that needs a dataflow builds
    one on a replica, as ``small_read_updates = 0`` does for the whole environment."""
    settings: dict[str, str] = field(default_factory=lambda: dict(ACCEPTED_SETTINGS))
    client_settings: dict[str, str] = field(default_factory=dict)
    """What a wire client's session has set and was told (``server_version``, ``user``,
    ``DateStyle``…): the values ``current_setting`` and ``pg_settings`` show."""
    notices: list[Notice] = field(default_factory=list)
    """The notices the last text run in this session raised (an identifier truncated to 63
    bytes), oldest first; a wire client is sent them (:mod:`spate.sql.notices`)."""
    block: Block | None = None
    """The open transaction block (``None``: each statement is its own transaction)."""
    cancel: threading.Event | None = None
    """Set from another thread to cancel the read in progress (a wire client's cancel request,
    its statement timeout): see ``Environment.select``'s ``cancel``."""
    rows_affected: int | None = None
    """How many rows the last INSERT, UPDATE or DELETE wrote, matched or removed (for the
    CommandComplete tag of a wire client); ``None`` after any other statement."""
    tag: str | None = None
    """PostgreSQL's command tag of the last statement run (:func:`spate.sql.tags.command_tag`:
    ``CREATE TABLE``, ``INSERT 0 3``…), read from its tokens and rows, for a wire client."""

    def read_timeout(self) -> float:
        """Seconds a read waits (``SET statement_timeout`` in ms; 0, the default: 300 s)."""
        try:
            ms = int(self.settings.get("statement_timeout", "0"))
        except ValueError:
            ms = 0
        return ms / 1000 if ms > 0 else 300.0
