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

import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from spate.environment.builtins import BUILTINS
from spate.environment.catalog import IndexItem, TableItem, item_desc, kind_of
from spate.environment.sql import EnvironmentCatalog, SqlSession, default_cluster_name
from spate.errors import EvaluationFailed, UsageError
from spate.ids import GlobalId
from spate.pgwire import lexer
from spate.pgwire import types as pgt
from spate.pgwire.engine import Context, Described, Relation, Result, Rows, Stream
from spate.pgwire.errors import PgError
from spate.repr.arrow import data_schema
from spate.sql import plan_statements
from spate.sql import statements as st
from spate.sql.declared import column_types
from spate.sql.depth import too_complex
from spate.sql.results import result_schema

if TYPE_CHECKING:
    from spate.environment.api import Environment

USER_OID_BASE: Final = 20000
SYSTEM_OID_BASE: Final = 15000
"""spate_catalog relations (system ids s1, s2…) get oids below PostgreSQL's first user oid."""
_ROWS_FIRST: Final = ("SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN")
_COMPARE: Final = re.compile(r"([A-Za-z_][\w$]*)\s*(?:=|<>|!=|<=|>=|<|>)\s*\$(\d+)\b")
_COMPARE_REV: Final = re.compile(
    r"\$(\d+)\s*(?:=|<>|!=|<=|>=|<|>)\s*(?:[\w$]+\.)?([A-Za-z_][\w$]*)"
)
_CAST: Final = re.compile(r"\$(\d+)\s*::\s*([A-Za-z_][\w ]*?)(?=[^\w ]|$)")
_TYPE_NAMES: Final = {
    "bigint": 20, "int8": 20, "integer": 23, "int": 23, "int4": 23, "smallint": 21, "int2": 21,
    "text": 25, "varchar": 1043, "character varying": 1043, "boolean": 16, "bool": 16,
    "double precision": 701, "float8": 701, "real": 700, "float4": 700, "numeric": 1700,
    "date": 1082, "timestamp": 1114, "timestamptz": 1184, "jsonb": 3802, "bytea": 17,
}  # fmt: skip


def relation_oid(value: int) -> int:
    return USER_OID_BASE + value


class EnvironmentEngine:
    """:class:`~spate.pgwire.engine.Engine` over an open environment."""

    def __init__(self, env: Environment) -> None:
        self._env = env

    def _session(self, ctx: Context) -> SqlSession:
        """The connection's own SQL session (its cluster, its isolation)."""
        session = ctx.state.get("sql")
        if not isinstance(session, SqlSession):
            session = self._env.sql_session()
            ctx.state["sql"] = session
        return session

    def _sql(self, text: str, ctx: Context) -> object:
        session = self._session(ctx)
        session.session.cancel = ctx.canceled  # this call's: set, it cancels the call's read
        try:
            result: object = session.sql(text)
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
        catalog = EnvironmentCatalog(self._env, self._env.sql_session().definitions)
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
                query = view_query(catalog.definitions.get(item.name))
                out.append(
                    dataclasses.replace(relation, column_descriptions=columns, definition=query)
                )
        for b in BUILTINS:
            schema, _, name = b.name.partition(".")
            oid = SYSTEM_OID_BASE + b.id.value
            out.append(Relation(oid, name, "source", data_schema(b.desc), namespace=schema))
        return out

    def describe(self, sql: str, param_oids: Sequence[int], ctx: Context) -> Described:
        n = lexer.param_count(sql)
        oids = self._param_types(sql, param_oids, n)
        head = lexer.strip_comments(sql).lstrip().split(None, 1)
        first = head[0].upper() if head else ""
        if first == "SUBSCRIBE":
            return Described(oids, self._subscribe_schema(sql, ctx))
        if first not in _ROWS_FIRST:
            return Described(oids, None)
        if first in ("SHOW", "EXPLAIN"):
            table = self._sql(sql, ctx)
            return Described(oids, table.schema if isinstance(table, pa.Table) else None)
        nulls = [
            f"CAST(NULL AS {_cast_name(o)})" if _cast_name(o) else "NULL" for o in oids
        ]  # fmt: skip
        bound = lexer.bind(sql, nulls)
        planned = _planned_schema(self._session(ctx), bound)
        if planned is not None:
            return Described(oids, planned)
        table = self._schema_sql(f"SELECT * FROM ({bound}) AS _described LIMIT 0", ctx)  # noqa: S608
        if not isinstance(table, pa.Table):
            return Described(oids, None)
        return Described(oids, table.schema)

    def transaction(self, sql: str, ctx: Context) -> None:
        """BEGIN, COMMIT, ROLLBACK of the connection's SQL session (its transaction block:
        :mod:`spate.environment.sql_block`)."""
        self._sql(sql, ctx)

    def copy_schema(self, table: str, ctx: Context) -> pa.Schema:
        """The columns of ``table``, which a COPY FROM STDIN writes (42P01 if there is no
        such relation, 42809 if it is not a table)."""
        session = self._session(ctx)
        item = self._env.runtime.catalog.find(table)
        if item is None:
            raise PgError("42P01", f'relation "{table}" does not exist')
        if not isinstance(item, TableItem):
            raise PgError("42809", f'cannot copy to {kind_of(item)} "{table}"')
        obj = EnvironmentCatalog(self._env, session.definitions).lookup(table)
        assert obj is not None and obj.desc is not None
        return result_schema(obj.desc, obj.desc.names, [t.name for t in column_types(obj)])

    def copy_in(self, table: str, rows: Sequence[tuple[Any, ...]] | pa.Table, ctx: Context) -> int:
        """Write the rows of a COPY FROM STDIN as an INSERT of them: in one write, or into
        the connection's transaction block."""
        return self._session(ctx).insert_rows(table, rows)

    def execute(self, sql: str, ctx: Context) -> Result:
        try:
            result = self._sql(sql, ctx)
        except EvaluationFailed as e:  # PostgreSQL's text, not spate's plan of the query
            raise PgError(e.sqlstate, e.pg_message) from e
        if isinstance(result, pa.Table):
            first = lexer.strip_comments(sql).lstrip()[:4].upper()
            return Rows(result, "SHOW" if first == "SHOW" else f"SELECT {result.num_rows}")
        if result is None:
            return Rows(None, command_tag(sql, self._session(ctx).session.rows_affected))
        if isinstance(result, Iterator):
            return self._stream(sql, result, ctx)
        raise UsageError(f"unexpected result of type {type(result).__name__} from SQL")

    # -- helpers ---------------------------------------------------------------------------------

    def _param_types(self, sql: str, declared: Sequence[int], n: int) -> tuple[int, ...]:
        out = list(declared[:n]) + [0] * max(0, n - len(declared))
        columns: dict[str, int] = {}
        for r in self.relations():
            for f in r.schema:
                columns.setdefault(f.name.lower(), pgt.for_field(f).oid)
        for m in _CAST.finditer(sql):
            i = int(m.group(1)) - 1
            oid = _TYPE_NAMES.get(" ".join(m.group(2).lower().split()))
            if 0 <= i < n and not out[i] and oid:
                out[i] = oid
        for m in _COMPARE.finditer(sql):
            i = int(m.group(2)) - 1
            if 0 <= i < n and not out[i]:
                out[i] = columns.get(m.group(1).lower(), 0)
        for m in _COMPARE_REV.finditer(sql):
            i = int(m.group(1)) - 1
            if 0 <= i < n and not out[i]:
                out[i] = columns.get(m.group(2).lower(), 0)
        return tuple(out)

    def _subscribe_schema(self, sql: str, ctx: Context) -> pa.Schema:
        data = _planned_schema(self._session(ctx), sql)
        if data is None:
            query = subscribe_query(sql)
            table = self._schema_sql(f"SELECT * FROM {query} LIMIT 0", ctx)  # noqa: S608
            if not isinstance(table, pa.Table):
                raise UsageError("SUBSCRIBE needs a relation or a query that returns rows")
            data = table.schema
        return pa.schema(
            [
                pgt.field_with_type("mz_timestamp", "numeric", pa.int64()),
                pa.field("mz_diff", pa.int64()),
                *data,
            ]
        )

    def _stream(
        self, sql: str, changes: Iterator[list[tuple[int, Any, int]]], ctx: Context
    ) -> Stream:
        schema = self._subscribe_schema(sql, ctx)

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


def _planned_schema(session: SqlSession, sql: str) -> pa.Schema | None:
    """The data columns of a SELECT or SUBSCRIBE from the SQL planner, without reading
    anything; ``None`` for other statements or when planning fails (the statement's own run
    then reports the error)."""
    try:
        planned = plan_statements(sql, EnvironmentCatalog(session.env, session.definitions))
    except Exception:
        return None
    if len(planned) != 1 or not isinstance(planned[0], (st.Select, st.Subscribe)):
        return None
    stmt = planned[0]
    return result_schema(stmt.plan.desc, stmt.names, stmt.types)


def subscribe_query(sql: str) -> str:
    """The relation a SUBSCRIBE reads, as a FROM item: ``name`` or ``(query) AS s``."""
    text = lexer.strip_comments(sql).strip().rstrip(";")
    m = re.match(r"SUBSCRIBE\s+(?:TO\s+)?", text, re.I)
    if not m:
        raise UsageError(f"not a SUBSCRIBE: {text[:60]!r}")
    rest = text[m.end() :]
    if rest.startswith("("):
        depth = lexer.depths(rest)
        end = next((m.start() for m in re.finditer(r"\)", rest) if depth[m.start()] == 1), -1)
        if end < 0:
            raise UsageError("SUBSCRIBE (…: unbalanced parentheses")
        return f"{rest[: end + 1]} AS _subscribed"
    name = re.match(r'("(?:[^"]|"")+"|[\w$.]+)', rest)
    if not name:
        raise UsageError(f"SUBSCRIBE needs a relation name or a query: {text[:60]!r}")
    return name.group(1)


def view_query(create_sql: str | None) -> str | None:
    """The query of a ``CREATE [MATERIALIZED] VIEW`` text (what ``pg_get_viewdef`` shows):
    what follows its first ``AS`` outside parentheses; ``None`` for other statements."""
    if not create_sql or not re.match(
        r"\s*CREATE\s+(OR\s+REPLACE\s+)?(MATERIALIZED\s+)?VIEW\b", create_sql, re.I
    ):
        return None
    text = lexer.strip_comments(create_sql)
    depth = lexer.depths(text)
    for m in re.finditer(r"\bAS\b", text, re.I):
        if depth[m.start()] == 0:
            return text[m.end() :].strip().rstrip(";")
    return None


def command_tag(sql: str, rows: int | None = None) -> str:
    """PostgreSQL's CommandComplete tag for a statement that returns no rows; ``rows``: how
    many an INSERT, UPDATE or DELETE wrote, matched or removed (if known)."""
    text = " ".join(lexer.strip_comments(sql).split()).upper()
    words = text.split(" ")
    head = words[0] if words else ""
    if head == "INSERT":
        return f"INSERT 0 {_values_rows(lexer.strip_comments(sql)) if rows is None else rows}"
    if head in ("UPDATE", "DELETE"):
        return f"{head} {rows or 0}"
    if head == "CREATE" and _TABLE_AS.match(text):
        return f"SELECT {rows}" if rows is not None else "CREATE TABLE AS"
    if head in ("CREATE", "DROP", "ALTER"):
        rest = [w for w in words[1:] if w not in ("OR", "REPLACE", "DEFAULT", "TEMPORARY", "TEMP")]
        if rest[:2] == ["MATERIALIZED", "VIEW"] or rest[:2] == ["CLUSTER", "REPLICA"]:
            return f"{head} {rest[0]} {rest[1]}"
        return f"{head} {rest[0]}" if rest else head
    return head


_TABLE_AS = re.compile(r'CREATE TABLE (IF NOT EXISTS )?("(?:[^"]|"")+"|[^ (]+) AS\b')
"""``CREATE TABLE … AS``: tagged ``SELECT n`` when it wrote n rows, as PostgreSQL tags it."""


def _values_rows(sql: str) -> int:
    m = re.search(r"\bVALUES\b", sql, re.I)
    if not m:
        return 0
    rest = sql[m.end() :]
    depth = lexer.depths(rest)
    return sum(1 for m in re.finditer(r"\(", rest) if depth[m.start()] == 1)


def _cast_name(oid: int) -> str | None:
    return pgt.BY_OID[oid].name if oid in pgt.BY_OID and oid not in (0, 705) else None
