"""The engine contract over an :class:`~spate.environment.api.Environment`'s SQL.

Statements run in the connection's own SQL session (``Environment.sql_session``: its
``SET cluster``, its isolation), one statement per call (the session splits and binds). A row
result becomes :class:`Rows` with its tag; SUBSCRIBE's iterator becomes a :class:`Stream` of
tables with ``mz_timestamp`` (numeric: a number to machines), ``mz_diff`` and the data
columns. The statement's tag is derived from its text (``CREATE TABLE``); INSERT, UPDATE and
DELETE tags carry the rows the session's statement wrote, matched or removed (``UPDATE 3``).
An evaluation error is answered as PostgreSQL does (``division by zero``, 22012), without the
expression and row spate's message names.

:meth:`describe` finds a query's columns by planning it (parameters as typed NULLs), and a
parameter's type from the column it is compared with or the type it is cast to.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from sqlglot.tokenizer_core import TokenType

from spate.environment.builtins import BUILTINS
from spate.environment.catalog import IndexItem, TableItem, item_desc, kind_of
from spate.environment.prepared_plans import TextPlans
from spate.environment.sql import EnvironmentCatalog, SqlSession, default_cluster_name
from spate.errors import EvaluationFailed, InputMissing, UsageError
from spate.ids import GlobalId
from spate.pgwire import types as pgt
from spate.pgwire.engine import (
    Bound,
    Context,
    Described,
    Relation,
    Result,
    Rows,
    Stream,
    Values,
)
from spate.pgwire.errors import PgError
from spate.pgwire.prepared import (
    execute_prepared,
    execute_text,
    finish_prepared,
    lookup_at_once,
    start_prepared,
    text_at_once,
)
from spate.plan.evaluation.interrupt import interruptible
from spate.repr.arrow import data_schema
from spate.sql import Parsed, SqlError
from spate.sql import parse as parse_sql
from spate.sql import statements as st
from spate.sql.declared import column_types
from spate.sql.depth import too_complex
from spate.sql.describe import describe as describe_statement
from spate.sql.results import TAGGED, result_schema
from spate.sql.session_statements import Set, TransactionControl
from spate.sql.types import PgType as SqlType
from spate.sql.types import named_type

if TYPE_CHECKING:
    from spate.environment.api import Environment

USER_OID_BASE: Final = 20000
SYSTEM_OID_BASE: Final = 15000
"""spate_catalog relations (system ids s1, s2…) get oids below PostgreSQL's first user oid."""


def relation_oid(value: int) -> int:
    return USER_OID_BASE + value


class EnvironmentEngine:
    """:class:`~spate.pgwire.engine.Engine` over an open environment."""

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._plans = TextPlans()  # the plans of SELECT texts run again

    def _session(self, ctx: Context) -> SqlSession:
        """The connection's own SQL session (its cluster, its isolation)."""
        session = ctx.state.get("sql")
        if not isinstance(session, SqlSession):
            session = self._env.sql_session()
            ctx.state["sql"] = session
        return session

    def _sql(self, text: str, ctx: Context) -> object:
        return self._sql_call(lambda session: session.sql(text), ctx)

    def _sql_call(self, run: Callable[[SqlSession], object], ctx: Context) -> object:
        session = self._session(ctx)
        session.session.cancel = ctx.canceled  # this call's: set, it cancels the call's read
        session.session.client_settings = dict(ctx.vars)  # current_setting, pg_settings
        try:
            with interruptible(ctx.canceled):  # and an evaluation in process (its thread's)
                result: object = run(session)
        except RecursionError:
            # Planning takes deep statements (spate.sql.depth), but optimizing and running one
            # may recurse as well (evaluating a 600-term IN): 54001, not an internal error. (Run
            # again on a deep stack, a 2,000-term sum was still optimizing after minutes.)
            raise too_complex("it nests deeper than running it can follow") from None
        finally:  # raised before the statement failed, too
            ctx.notices.extend((n.sqlstate, n.message) for n in session.session.notices)
            session.session.notices.clear()
        return result

    def default_cluster(self) -> str:
        """The cluster a session runs on before it sets one (``SHOW cluster``)."""
        return default_cluster_name(self._env.runtime) or "default"

    def _schema_sql(self, text: str, ctx: Context) -> object:
        """``text`` (a read of no rows, for its columns) outside the session's transaction
        block: finding a statement's columns is no statement of the block."""
        session = self._session(ctx).session
        block, session.block = session.block, None
        try:
            return self._sql(text, ctx)
        finally:
            session.block = block

    # -- the contract ----------------------------------------------------------------------------

    def relations(self) -> Sequence[Relation]:
        catalog = EnvironmentCatalog(self._env)
        state = self._env.runtime.catalog
        items = sorted(state, key=lambda i: i.name)
        schemas: dict[GlobalId, pa.Schema] = {}
        for item in items:
            obj = None if isinstance(item, IndexItem) else catalog.lookup(item.name)
            if obj is not None and obj.desc is not None:
                types = [t.name for t in column_types(obj)]
                schemas[item.id] = result_schema(obj.desc, obj.desc.names, types)
        by_id = {i.id: i for i in items}
        out = []
        for item in items:
            kind = kind_of(item)
            if isinstance(item, IndexItem):
                on = by_id.get(item.on)
                on_desc = item_desc(on) if on is not None else None
                if on is None or on_desc is None or on.id not in schemas:
                    continue
                cols = tuple(on_desc.names[k] for k in item.key)
                schema = pa.schema([f for f in schemas[on.id] if f.name in cols])
                oid = relation_oid(item.id.value)
                text = state.comment(item.id, None)
                out.append(Relation(oid, item.name, kind, schema, on.name, cols, description=text))
            elif item.id in schemas:
                oid = relation_oid(item.id.value)
                columns = tuple(state.comment(item.id, i) for i in range(len(schemas[item.id])))
                text = state.comment(item.id, None)
                relation = Relation(oid, item.name, kind, schemas[item.id], description=text)
                query = view_query(catalog.create_sql(item.name))
                out.append(
                    dataclasses.replace(relation, column_descriptions=columns, definition=query)
                )
        for b in BUILTINS:
            schema, _, name = b.name.partition(".")
            oid = SYSTEM_OID_BASE + b.id.value
            out.append(Relation(oid, name, "source", data_schema(b.desc), namespace=schema))
        return out

    def describe(self, sql: str, param_oids: Sequence[int], ctx: Context) -> Described:
        """The planner's description of ``sql`` (:func:`spate.sql.describe.describe`): its
        parameters typed by their contexts, its result columns as planned. Nothing is run
        but a ``SHOW`` of spate's objects, which lists the catalog."""
        return self.describe_parsed(sql, param_oids, ctx)

    def describe_parsed(
        self, statement: str | Parsed, param_oids: Sequence[int], ctx: Context
    ) -> Described:
        """:meth:`describe` of a statement the session split already (not split again)."""
        sql = statement if isinstance(statement, str) else statement.sql
        session = self._session(ctx)
        declared = [sql_type(o) for o in param_oids]
        catalog = EnvironmentCatalog(session.env)
        d = describe_statement(statement, catalog, declared)
        oids = tuple(pg_oid(t) for t in d.params)
        stmt = d.statement
        if isinstance(stmt, st.Subscribe):
            return Described(oids, subscribe_schema(d.columns or pa.schema([])))
        if isinstance(stmt, st.ShowVariable):
            return Described(oids, pa.schema([pa.field(stmt.name.lower(), pa.string())]))
        if isinstance(stmt, st.ShowObjects):
            table = self._schema_sql(sql, ctx)
            return Described(oids, table.schema if isinstance(table, pa.Table) else None)
        return Described(oids, d.columns)

    def transaction(self, stmt: TransactionControl, ctx: Context) -> None:
        """BEGIN, COMMIT, ROLLBACK and the savepoints of the connection's SQL session (its
        transaction block: :mod:`spate.environment.sql_block`), as the session recognised
        them: not parsed again."""
        self._sql_call(lambda session: session.control(stmt), ctx)

    def set_variable(self, stmt: Set, ctx: Context) -> None:
        """A SET or RESET of the connection's SQL session, as the session recognised it: not
        written out as text and parsed again."""
        assert stmt.name is not None
        name, value = stmt.name, stmt.value
        self._sql_call(lambda session: session.set_variable(name, value), ctx)

    def copy_schema(self, table: str, ctx: Context) -> pa.Schema:
        """The columns of ``table``, which a COPY FROM STDIN writes (42P01 if there is no
        such relation, 42809 if it is not a table)."""
        item = self._env.runtime.catalog.find(table)
        if item is None:
            raise PgError("42P01", f'relation "{table}" does not exist')
        if not isinstance(item, TableItem):
            raise PgError("42809", f'cannot copy to {kind_of(item)} "{table}"')
        obj = EnvironmentCatalog(self._env).lookup(table)
        assert obj is not None and obj.desc is not None
        # COPY decodes each column into its stored type: timestamptz values as UTC
        # timestamps; an interval column is an interval (each field read as one, then
        # written through the INSERT path, which stores it), never its stored text
        types = [t.name for t in column_types(obj)]
        schema = result_schema(obj.desc, obj.desc.names, types)
        stored = data_schema(obj.desc)
        return pa.schema(
            [
                stored.field(i) if t in TAGGED else f
                for i, (f, t) in enumerate(zip(schema, types, strict=True))
            ]
        )

    def copy_in(self, table: str, rows: Sequence[tuple[Any, ...]] | pa.Table, ctx: Context) -> int:
        """Write the rows of a COPY FROM STDIN as an INSERT of them: in one write, or into
        the connection's transaction block."""
        return self._session(ctx).insert_rows(table, rows)

    def execute(self, sql: str, ctx: Context) -> Result:
        return self._answer(sql, lambda session: session.sql(sql), ctx)

    def execute_parsed(self, parsed: Parsed, ctx: Context) -> Result:
        """:meth:`execute` of a statement the session split already (not split again); a
        SELECT run again keeps its plan (:func:`spate.pgwire.prepared.execute_text`)."""
        plans = self._plans
        return self._answer(parsed, lambda s: execute_text(s, parsed, plans), ctx)

    def start_parsed(self, parsed: Parsed, ctx: Context) -> Values | None:
        """:meth:`execute_parsed`'s result answered at once, without a worker thread, when
        it is a kept SELECT whose inputs' contents are in memory here
        (:func:`spate.pgwire.prepared.text_at_once`); ``None`` for anything else."""
        return text_at_once(self._session(ctx), parsed, self._plans)

    def execute_prepared(self, bound: Bound, ctx: Context) -> Result:
        """:meth:`execute` of an Execute of a prepared statement: a prepared lookup keeps its
        plan between executions (:mod:`spate.pgwire.prepared`)."""
        return self._answer(bound.sql, lambda session: execute_prepared(session, bound), ctx)

    def start_prepared(self, bound: Bound, ctx: Context) -> Awaitable[Result] | Values | None:
        """:meth:`execute_prepared` without a worker thread, for a prepared lookup with a valid
        kept plan (:func:`spate.pgwire.prepared.start_prepared`): its result at once when its
        rows are in memory here, else its read started on the environment's loop now, and
        awaited; ``None`` for anything else. Canceling the awaitable cancels the read."""
        session = self._session(ctx)
        session.session.cancel = ctx.canceled
        session.session.client_settings = dict(ctx.vars)
        started = start_prepared(session, bound)
        if started is None or isinstance(started, Values):
            return started
        future, stmt = started

        async def answer() -> Result:
            try:
                table = await asyncio.wrap_future(future)
            except InputMissing:  # dropped since: the text, planned again, says what is gone
                return await asyncio.to_thread(self.execute_prepared, bound, ctx)
            except EvaluationFailed as e:  # PostgreSQL's text, not spate's plan of the query
                raise PgError(e.sqlstate, e.pg_message) from e
            finally:
                ctx.notices.extend((n.sqlstate, n.message) for n in session.session.notices)
                session.session.notices.clear()
            result = finish_prepared(stmt, table)
            return Rows(result, f"SELECT {result.num_rows}")

        return answer()

    def lookup_at_once(
        self, cache: dict[str, object], values: tuple[object, ...], ctx: Context
    ) -> Values | None:
        """:meth:`start_prepared`'s result of an Execute of a prepared statement whose kept
        plans are ``cache`` with ``values``, when it is answered at once
        (:func:`spate.pgwire.prepared.lookup_at_once`: a kept lookup whose rows are in memory
        here); ``None``, having done nothing, for anything else."""
        session = ctx.state.get("sql")
        if not isinstance(session, SqlSession):
            return None  # nothing kept yet: the statement never ran in this session
        return lookup_at_once(session, cache, values)  # nothing to cancel: no wait, no I/O

    def _answer(
        self, statement: str | Parsed, run: Callable[[SqlSession], object], ctx: Context
    ) -> Result:
        try:
            result = self._sql_call(run, ctx)
        except EvaluationFailed as e:  # PostgreSQL's text, not spate's plan of the query
            raise PgError(e.sqlstate, e.pg_message) from e
        tag = self._session(ctx).session.tag or ""
        if isinstance(result, pa.Table):
            return Rows(result, "SHOW" if tag == "SHOW" else f"SELECT {result.num_rows}")
        if result is None:
            return Rows(None, tag)
        if isinstance(result, Iterator):
            return self._stream(statement, result, ctx)
        raise UsageError(f"unexpected result of type {type(result).__name__} from SQL")

    # -- helpers ---------------------------------------------------------------------------------

    def _subscribe_schema(self, statement: str | Parsed, ctx: Context) -> pa.Schema:
        session = self._session(ctx)
        catalog = EnvironmentCatalog(session.env)
        columns = describe_statement(statement, catalog).columns
        return subscribe_schema(columns or pa.schema([]))

    def _stream(
        self, statement: str | Parsed, changes: Iterator[list[tuple[int, Any, int]]], ctx: Context
    ) -> Stream:
        schema = self._subscribe_schema(statement, ctx)

        def batches() -> Iterator[pa.Table]:
            names = schema.names
            for batch in changes:
                cols: list[list[Any]] = [[] for _ in names]
                for time, row, diff in batch:
                    cols[0].append(time)
                    cols[1].append(diff)
                    for i, v in enumerate(row):
                        cols[i + 2].append(v)
                yield pa.table(
                    [pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)],
                    schema=schema,
                )

        def close() -> None:
            closer = getattr(changes, "close", None)
            if closer is not None:
                closer()

        return Stream(schema, batches(), close)


def subscribe_schema(data: pa.Schema) -> pa.Schema:
    """The columns a SUBSCRIBE streams: ``mz_timestamp``, ``mz_diff`` and its data columns."""
    return pa.schema(
        [
            pgt.field_with_type("mz_timestamp", "numeric", pa.int64()),
            pa.field("mz_diff", pa.int64()),
            *data,
        ]
    )


def sql_type(oid: int) -> SqlType | None:
    """The SQL layer's type of a parameter a client declared (``None``: undeclared, or a
    type spate's SQL does not have, which its context then decides)."""
    pg = pgt.BY_OID.get(oid)
    if pg is None or oid == pgt.UNKNOWN.oid:
        return None
    try:
        return named_type(pg.name)
    except KeyError:
        return None


def pg_oid(t: SqlType) -> int:
    """The PostgreSQL type OID of a SQL layer type (``text`` for one the wire has not)."""
    pg = pgt.BY_NAME.get(t.name)
    return pg.oid if pg is not None else pgt.TEXT.oid


def view_query(create_sql: str | None) -> str | None:
    """The query of a ``CREATE [MATERIALIZED] VIEW`` text (what ``pg_get_viewdef`` shows):
    what follows its first ``AS`` outside parentheses; ``None`` for other statements."""
    if not create_sql:
        return None
    try:
        parsed = parse_sql(create_sql)
    except SqlError:
        return None
    if len(parsed) != 1:
        return None
    tokens = parsed[0].tokens
    words = [t.text.upper() for t in tokens[:6]]
    if words[:1] != ["CREATE"] or "VIEW" not in words:
        return None
    depth = 0
    for tok in tokens:
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
        elif tok.token_type is TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and tok.token_type is TokenType.ALIAS:
            return create_sql[tok.end + 1 : parsed[0].source.end].strip()
    return None
