"""A sink into a PostgreSQL table: upsert by key, or a changelog; progress in the same transaction.

Each interval ``[lower, upper)`` is written in **one transaction** that also moves the sink's row
in the progress table (``progress_table``, default ``spate_sink_progress(sink_id, upper)``) from
``lower`` to ``upper``; the
row is locked first (``FOR UPDATE``) and checked, so a crash before the commit writes nothing and
a retried or replayed interval is skipped: the table is written exactly once.

* ``changelog``: every update is a row of the table's columns plus ``_time`` and ``_diff``.
* ``upsert``: the table holds the collection's contents at the sink's frontier, one row per key
  (the key is the table's primary key). An interval's updates are consolidated (their net effect
  at ``upper - 1``); rows whose net multiplicity is negative are deleted and rows whose net is
  positive inserted (a multiplicity other than ``-1``/``0``/``+1`` per row, two rows for one key,
  or the deletion of a row the table does not hold means the collection has no unique key and
  the sink stops with ``SinkError``; the transaction is rolled back).

The target table is created (from the collection's description) if it does not exist;
otherwise its columns must match. Data moves by ``COPY … FROM STDIN (FORMAT csv)`` of text made
by pyarrow, not row by row.
"""

from __future__ import annotations

import io
import re
from typing import Final

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from psycopg import sql

from spate.frontier.antichain import Antichain, Frontier
from spate.protocol.storage_desc import PostgresSinkConnection, PostgresSinkMode
from spate.repr.consolidate import data_columns
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import ScalarKind, ScalarType
from spate.storage.sinks.interval import SinkError, SinkFenced, check_interval

Conn = psycopg.Connection[tuple[object, ...]]

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")
CONNECT_TIMEOUT_S: Final = 5


def table_name(name: object, what: str) -> tuple[str, str]:
    """``table`` or ``schema.table``, each a plain identifier; raise ``SinkError`` otherwise."""
    if not isinstance(name, str):
        raise SinkError(f"{what} must be a table name, got {type(name).__name__} {name!r}")
    parts = name.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise SinkError(
            f"{what} {name!r} is not a table name: table or schema.table, each a letter or "
            "'_' then letters, digits, '_' or '$' (at most 63)"
        )
    return ("public", parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def check_sink(connection: PostgresSinkConnection, desc: RelationDesc, *, sink: str) -> None:
    """What can be checked without the database: mode, table names, key columns."""
    if not isinstance(connection.mode, PostgresSinkMode):
        raise SinkError(f"sink {sink}: mode must be upsert or changelog, got {connection.mode!r}")
    table_name(connection.table, f"sink {sink}: table")
    table_name(connection.progress_table, f"sink {sink}: progress table")
    if not isinstance(connection.key, tuple) or not all(isinstance(k, str) for k in connection.key):
        raise SinkError(f"sink {sink}: key must be a tuple of column names, got {connection.key!r}")
    if connection.mode is PostgresSinkMode.UPSERT:
        if not connection.key:
            raise SinkError(f"sink {sink}: an upsert sink needs key columns")
        missing = [k for k in connection.key if k not in desc.names]
        if missing:
            raise SinkError(
                f"sink {sink}: key columns {missing} not found; columns: {', '.join(desc.names)}"
            )


def check_reachable(url: str, *, sink: str) -> None:
    """Connect once (within seconds) and run ``select 1``; raise ``SinkError`` if that fails."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            conn.execute("select 1")
    except psycopg.Error as e:
        raise SinkError(f"sink {sink}: cannot connect to PostgreSQL: {e}") from None


def pg_type(t: ScalarType) -> str:
    match t.kind:
        case ScalarKind.BOOL:
            return "boolean"
        case ScalarKind.INT64:
            return "bigint"
        case ScalarKind.FLOAT64:
            return "double precision"
        case ScalarKind.NUMERIC:
            return f"numeric({t.precision},{t.scale})"
        case ScalarKind.TEXT:
            return "text"
        case ScalarKind.BYTES:
            return "bytea"
        case ScalarKind.DATE:
            return "date"
        case ScalarKind.TIMESTAMP:
            return "timestamp without time zone"
        case ScalarKind.JSONB:
            return "jsonb"
    raise AssertionError(f"unhandled scalar kind {t.kind}")


class PostgresSink:
    """Exactly-once writer of a collection into a PostgreSQL table."""

    def __init__(
        self,
        connection: PostgresSinkConnection,
        desc: RelationDesc,
        *,
        sink: str,
        progress_key: str | None = None,
    ) -> None:
        """``sink`` names the sink in errors; ``progress_key`` (default ``sink``) is its row in
        the progress table, which must be unique among every sink writing to that table (two
        environments sharing a database both have a sink ``u3``)."""
        check_sink(connection, desc, sink=sink)
        schema, table = table_name(connection.table, f"sink {sink}: table")
        self._config = connection
        self._schema = schema
        self._table = table
        self._changelog = connection.mode is PostgresSinkMode.CHANGELOG
        self._desc = desc
        self._sink = sink
        self._conn: Conn | None = None
        self._target = sql.Identifier(schema, table)
        # As given: unqualified, it is found on the search path.
        self._progress = sql.Identifier(*connection.progress_table.split("."))
        self._key = progress_key or sink

    # -- connection and setup -------------------------------------------------------------

    def _db(self) -> Conn:
        if self._conn is None or self._conn.closed:
            try:
                self._conn = psycopg.connect(self._config.connection.reveal(), connect_timeout=10)
            except psycopg.OperationalError as e:
                raise SinkError(f"sink {self._sink}: cannot connect to PostgreSQL: {e}") from None
            with self._conn.transaction():
                self._conn.execute("set timezone = 'UTC'")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _columns(self) -> list[tuple[str, str]]:
        cols = [(c.name, pg_type(c.type)) for c in self._desc.columns]
        if self._changelog:
            cols += [(TIME_COLUMN, "bigint"), (DIFF_COLUMN, "bigint")]
        return cols

    def prepare(self) -> None:
        """Create the progress and target tables if needed; check an existing target."""
        conn = self._db()
        cols = self._columns()
        with conn.transaction():
            conn.execute(
                sql.SQL(
                    "create table if not exists {} (sink_id text primary key, upper bigint, "
                    "updated_at timestamptz not null default now())"
                ).format(self._progress)
            )
            existing = conn.execute(
                "select a.attname, format_type(a.atttypid, a.atttypmod) from pg_attribute a "
                "join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = "
                "c.relnamespace where n.nspname = %s and c.relname = %s and a.attnum > 0 and "
                "not a.attisdropped order by a.attnum",
                (self._schema, self._table),
            ).fetchall()
            if not existing:
                defs = [sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t)) for n, t in cols]
                if not self._changelog:
                    defs.append(
                        sql.SQL("primary key ({})").format(
                            sql.SQL(", ").join(sql.Identifier(k) for k in self._config.key)
                        )
                    )
                conn.execute(
                    sql.SQL("create table {} ({})").format(self._target, sql.SQL(", ").join(defs))
                )
            elif [(str(n), str(t)) for n, t in existing] != cols:
                raise SinkError(
                    f"sink {self._sink}: table {self._schema}.{self._table} exists "
                    f"with columns {[(str(n), str(t)) for n, t in existing]}, expected {cols}"
                )
            conn.execute(
                sql.SQL(
                    "insert into {} (sink_id, upper) values (%s, 0) on conflict do nothing"
                ).format(self._progress),
                (self._key,),
            )

    @property
    def upper(self) -> Frontier:
        """The sink's committed frontier."""
        conn = self._db()
        with conn.transaction():
            row = conn.execute(
                sql.SQL("select upper from {} where sink_id = %s").format(self._progress),
                (self._key,),
            ).fetchone()
        if row is None:
            return Antichain.minimum()
        return Antichain.empty() if row[0] is None else Antichain.of(int(row[0]))  # type: ignore[call-overload]

    # -- writing ------------------------------------------------------------------------------

    def write(self, updates: pa.Table, *, lower: Frontier, upper: Frontier) -> bool:
        """Commit ``[lower, upper)`` with its progress; ``False`` if already committed."""
        table = check_interval(self._sink, self._desc, updates, lower=lower, upper=upper)
        conn = self._db()
        try:
            with conn.transaction():
                row = conn.execute(
                    sql.SQL("select upper from {} where sink_id = %s for update").format(
                        self._progress
                    ),
                    (self._key,),
                ).fetchone()
                if row is None:
                    raise SinkError(f"sink {self._sink}: no progress row; call prepare() first")
                current = Antichain.empty() if row[0] is None else Antichain.of(int(row[0]))  # type: ignore[call-overload]
                if upper.less_equal(current):
                    return False
                if lower != current:
                    raise SinkFenced(
                        f"sink {self._sink}: [{lower}, {upper}) does not start at the committed "
                        f"frontier {current}"
                    )
                if self._changelog:
                    self._copy_in(conn, table)
                else:
                    self._upsert(conn, table)
                conn.execute(
                    sql.SQL(
                        "update {} set upper = %s, updated_at = now() where sink_id = %s"
                    ).format(self._progress),
                    (upper.as_option(), self._key),
                )
        except psycopg.errors.UniqueViolation as e:
            raise SinkError(
                f"sink {self._sink}: two rows for one key {self._config.key} at "
                f"[{lower}, {upper}): the collection has no unique key ({e.diag.message_detail})"
            ) from None
        except psycopg.Error as e:
            raise SinkError(
                f"sink {self._sink}: PostgreSQL refused [{lower}, {upper}): {e}"
            ) from None
        return True

    def _upsert(self, conn: Conn, table: pa.Table) -> None:
        data = data_columns(table)
        net = table.group_by(data, use_threads=False).aggregate([(DIFF_COLUMN, "sum")])
        sums = net.column(f"{DIFF_COLUMN}_sum")
        if net.num_rows and (pc.max(sums).as_py() > 1 or pc.min(sums).as_py() < -1):
            raise SinkError(
                f"sink {self._sink}: a row changes multiplicity by more than one in an "
                "interval; an upsert sink needs a collection with a unique key"
            )
        deleted = net.filter(pc.equal(sums, -1)).select(list(self._config.key))
        inserted = net.filter(pc.equal(sums, 1)).select(data)
        if deleted.num_rows:
            keys = [(k, pg_type(self._desc.column(k).type)) for k in self._config.key]
            conn.execute(
                sql.SQL("create temporary table spate_sink_keys ({}) on commit drop").format(
                    sql.SQL(", ").join(
                        sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t)) for n, t in keys
                    )
                )
            )
            self._copy(conn, sql.Identifier("spate_sink_keys"), deleted)
            cond = sql.SQL(" and ").join(
                sql.SQL("t.{k} is not distinct from d.{k}").format(k=sql.Identifier(k))
                for k in self._config.key
            )
            cur = conn.execute(
                sql.SQL("delete from {} t using spate_sink_keys d where {}").format(
                    self._target, cond
                )
            )
            if cur.rowcount != deleted.num_rows:
                raise SinkError(
                    f"sink {self._sink}: {deleted.num_rows} rows to delete, the table held "
                    f"{cur.rowcount}; it no longer matches the collection"
                )
        if inserted.num_rows:
            self._copy(conn, self._target, inserted)

    def _copy_in(self, conn: Conn, table: pa.Table) -> None:
        if table.num_rows:
            self._copy(conn, self._target, table)

    def _copy(self, conn: Conn, target: sql.Composable, table: pa.Table) -> None:
        cols = sql.SQL(", ").join(sql.Identifier(n) for n in table.column_names)
        query = sql.SQL("copy {} ({}) from stdin (format csv)").format(target, cols)
        with conn.cursor().copy(query) as copy:
            copy.write(to_csv(table))


def to_csv(table: pa.Table) -> bytes:
    """CSV text that PostgreSQL's ``COPY … (FORMAT csv)`` reads back as ``table``."""
    columns = []
    for f, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type):
            hexed = [None if v is None else "\\x" + v.hex() for v in col.to_pylist()]
            col = pa.chunked_array([pa.array(hexed, pa.string())])
        columns.append(col)
    out = io.BytesIO()
    pacsv.write_csv(
        pa.Table.from_arrays(columns, names=table.column_names),
        out,
        write_options=pacsv.WriteOptions(include_header=False, quoting_style="needed"),
    )
    return out.getvalue()
