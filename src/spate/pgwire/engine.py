"""What the server needs from the database behind it: the engine contract.

The session owns everything about the protocol and the session (transactions, cursors, SET,
SHOW, COPY, catalog emulation); the engine only plans and runs statements. Parameters are
bound by the session as typed literals before :meth:`Engine.execute` sees the text, so an
engine that has no placeholders of its own still serves the extended protocol.

Every method MAY be called from several worker threads at once and MAY block. An engine MUST
NOT keep per-connection state: what a session set lives in :class:`Context`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import pyarrow as pa

from spate.sql import Parsed


@dataclass(slots=True)
class Context:
    """The calling session: its variables (``cluster``, ``search_path``…) and a cancel flag.

    A long-running engine call SHOULD look at ``canceled`` when it can stop early; the session
    answers ``57014`` as soon as the flag is set, whatever the call does afterwards (a cancel
    request, the statement timeout, the client closing its connection). Every engine call gets
    an event of its own, which once set stays set: a call takes ``ctx.canceled`` when it
    starts (the session may have moved on to its next call when it looks). ``state``
    is the engine's own per-session state (it lives as long as the connection).
    """

    vars: Mapping[str, str]
    canceled: threading.Event = field(default_factory=threading.Event)
    state: dict[str, object] = field(default_factory=dict)
    notices: list[tuple[str, str]] = field(default_factory=list)
    """``(sqlstate, message)`` of each notice an engine call raised (an identifier truncated
    to 63 bytes); the session sends them to the client after the call and empties the list."""


@dataclass(frozen=True, slots=True)
class Described:
    """The shape of a statement, found without running it.

    ``param_oids[i]`` is the PostgreSQL type of ``$(i+1)`` (0 when the engine cannot tell; the
    session then reports ``text``); ``schema`` is the result's columns, or ``None`` when the
    statement returns no rows.
    """

    param_oids: tuple[int, ...]
    schema: pa.Schema | None


@dataclass(frozen=True, slots=True)
class Rows:
    """A finished result: ``table`` (``None`` for statements without rows) and its tag
    (``SELECT 3``, ``INSERT 0 2``, ``CREATE TABLE``…)."""

    table: pa.Table | None
    tag: str


@dataclass(frozen=True, slots=True)
class Values:
    """A finished result given as Python values: ``rows``, each a tuple of its columns'
    values in ``schema``'s order, each value what ``pa.Table.to_pylist`` gives for a column
    of that type (``int``, ``str``, ``None``…), and its tag. It is the result a :class:`Rows`
    of a table of ``schema`` holding those rows is; only ``start_prepared`` and ``start_parsed``
    give one."""

    schema: pa.Schema
    rows: list[tuple[Any, ...]]
    tag: str


@dataclass(slots=True)
class Stream:
    """An endless result (SUBSCRIBE): ``batches`` yields tables of ``schema`` (an empty one
    means progress without changes) until it ends or :attr:`close` is called.

    ``batches`` is iterated by one thread only, and ``close`` is called from that same thread,
    exactly once, however the stream ends; it releases everything the subscription holds.
    """

    schema: pa.Schema
    batches: Iterator[pa.Table]
    close: Callable[[], None]


Result = Rows | Stream


class Bound:
    """An Execute of a prepared statement: ``statement`` as it was prepared (with its
    ``$n``), ``values`` the Bind's values decoded (``values[i]`` is ``$(i+1)``; ``None`` is
    NULL), ``sql`` the statement's text with them bound as literals (what
    :meth:`Engine.execute` would run; given, or made by a function the first time it is
    asked for), and ``cache``: the engine's own place for what it keeps of the statement
    between executions (its plan), which lives as long as the prepared statement and is the
    same object at every execution of it."""

    __slots__ = ("_sql", "_text", "cache", "statement", "values")

    def __init__(
        self,
        statement: Parsed,
        values: tuple[object, ...],
        sql: str | Callable[[], str],
        cache: dict[str, object],
    ) -> None:
        self.statement = statement
        self.values = values
        self.cache = cache
        self._sql = sql if isinstance(sql, str) else None
        self._text = None if isinstance(sql, str) else sql

    @property
    def sql(self) -> str:
        if self._sql is None:
            assert self._text is not None
            self._sql = self._text()
        return self._sql


@dataclass(frozen=True, slots=True)
class Relation:
    """A user-visible relation, as the catalog emulation describes it.

    ``oid`` MUST be stable for the life of the object (across restarts) and at least 16384.
    """

    oid: int
    name: str
    kind: str  # table | source | subsource | view | materialized view | index
    schema: pa.Schema
    on: str | None = None  # an index's relation
    key: tuple[str, ...] = ()  # an index's key columns
    namespace: str = "public"  # or spate_catalog, for spate's introspection relations
    description: str | None = None  # COMMENT ON the relation
    column_descriptions: tuple[str | None, ...] = ()  # COMMENT ON COLUMN, by column
    definition: str | None = None  # a view's query (pg_get_viewdef, pg_views.definition)


ENGINE_VARS: Final = frozenset(
    {"cluster", "transaction_isolation", "real_time_recency", "recursion_limit"}
)
"""Variables whose SET and RESET the session also passes to the engine (``set_variable``),
which may refuse them."""


class Engine(Protocol):
    """The engine contract. An engine MAY also have ``transaction(stmt, ctx)``: the session
    then passes it the typed ``BEGIN``, ``COMMIT``, ``ROLLBACK``, ``SAVEPOINT``, ``RELEASE``
    and ``ROLLBACK TO`` it recognised (:data:`spate.sql.session_statements.
    TransactionControl`; an engine without it sees none of them, and its transactions are the
    session's bookkeeping only).
    ``COMMIT`` either writes everything of the block or raises, and ends the block either way.

    An engine MAY also have ``execute_parsed(parsed, ctx) -> Result``: :meth:`execute` of a
    statement the session split with the SQL layer (:class:`spate.sql.Parsed`), which the
    engine MUST NOT split or tokenize again; the session then calls it instead of
    :meth:`execute` whenever it has the statement's tokens.

    A statement given to ``execute_parsed`` MAY carry arguments (:attr:`spate.sql.Parsed.
    arguments`: an SQL ``EXECUTE`` of a prepared statement); the engine MUST plan it with
    them (:func:`spate.sql.plan_statement` does), never run its text. Without
    ``execute_parsed`` the session refuses such an ``EXECUTE`` (``0A000``).

    An engine MAY also have ``describe_parsed(parsed, param_oids, ctx) -> Described``:
    :meth:`describe` of a statement the session split (not split again), which the session
    then calls instead of :meth:`describe` whenever it has the statement's tokens.

    An engine MAY also have ``execute_prepared(bound, ctx) -> Result``: :meth:`execute` of
    ``bound.sql``, an Execute of a prepared statement (:class:`Bound`); the session calls it
    instead for every such Execute whose statement has parameters. Its result MUST be the one
    :meth:`execute` of ``bound.sql`` would give; the engine MAY keep in ``bound.cache`` what
    does not change between executions (a plan, checked against the catalog it was made from).

    An engine MAY also have ``start_prepared(bound, ctx) -> Awaitable[Result] | Values |
    None``: the same Execute run without a worker thread. It is called on the session's event
    loop and MUST NOT block: it returns ``None`` (the session then calls
    ``execute_prepared``), the result ``execute_prepared`` would give as :class:`Values` when
    it has it at once (from memory, without I/O or waiting), or an awaitable of that result,
    whose work happens elsewhere (the engine's own event loop); the session may cancel the
    awaitable (a cancel request, the statement timeout), which MUST cancel that work.

    An engine MAY also have ``lookup_at_once(cache, values, ctx) -> Values | None``, called
    on the session's event loop (it MUST NOT block) for an Execute of a prepared statement
    with parameters whose ``Bound`` would have ``cache`` and ``values``: the result
    ``start_prepared`` would give as :class:`Values` when it has it at once, else ``None``,
    having done nothing (the session then binds and runs the Execute as usual). The session
    asks it when a Bind of the unnamed portal is followed, in what the client sent, by a
    Describe of that portal (or none), an Execute of all its rows and a Sync, and answers
    them all in one piece.

    An engine MAY also have ``start_parsed(parsed, ctx) -> Values | None``, called on the
    session's event loop before ``execute_parsed`` and MUST NOT block: the result
    ``execute_parsed`` would give as :class:`Values` when it has it at once (from memory,
    without I/O or waiting), else ``None`` (the session then calls ``execute_parsed``).

    An engine MAY also have ``set_variable(stmt, ctx)``: the session passes it each ``SET``
    and ``RESET`` of one of :data:`ENGINE_VARS` as the typed statement it recognised
    (:class:`spate.sql.session_statements.Set`: the name and the value as written, ``None``
    for RESET), before it keeps the value itself; the engine MAY refuse it (raise), and then
    the session keeps nothing. An engine without it sees none of them.

    An engine MAY also have ``copy_schema(table, ctx) -> pa.Schema`` (the columns of a table a
    ``COPY … FROM STDIN`` writes; raises for anything else) and ``copy_in(table, rows, ctx) ->
    int`` (write ``rows``, whole rows of the table as tuples or an Arrow table of its columns,
    all or none, as an INSERT of them would be, inside the session's transaction block if one
    is open); without them COPY FROM STDIN is refused (``0A000``).
    """

    def describe(self, sql: str, param_oids: Sequence[int], ctx: Context) -> Described:
        """The parameter types and result columns of ``sql`` (with ``$n`` placeholders).

        MUST NOT change anything. ``param_oids`` are the types the client declared (0 for
        undeclared); a declared type MUST be kept.
        """
        ...

    def execute(self, sql: str, ctx: Context) -> Result:
        """Run one statement (parameters already bound). Either happens completely or raises."""
        ...

    def relations(self) -> Sequence[Relation]:
        """Every relation the catalog emulation shows, in a stable order: the user's (in
        ``public``) first, then spate's own (``spate_catalog``)."""
        ...
