"""The PostgreSQL source: a consistent snapshot, then the change stream of a replication slot.

Resume points are LSNs (``int``). ``0`` is "nothing read". The snapshot of every table is bound
to the slot's consistent point ``L0``: it holds exactly the transactions committed before
``L0``, and the slot streams exactly those committed after. Each later chunk ends at the
``end_lsn`` of its last transaction ``R``, and the next chunk holds the transactions whose commit
record starts at or after ``R``. Progress rows are ``(lsn)``.

Determinism (see :mod:`spate.storage.sources.source`):

* the snapshot is read once, inside the snapshot exported by the slot's creation, and stashed
  durably (:mod:`spate.storage.sources.stash`) before :meth:`poll` returns it; :meth:`replay`
  of ``[0, L0)`` reads the stash;
* the change stream is re-read with ``pg_logical_slot_peek_binary_changes`` from the slot,
  which is advanced only by :meth:`committed`, so every transaction after the committed point
  can be read again.

:meth:`poll` with a resume point ``lower > 0`` MUST only be called after ``committed(lower)``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import pyarrow as pa
from psycopg import sql

from spate.protocol.secret import Secret
from spate.protocol.storage_desc import PostgresSource
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64
from spate.storage.sources.postgres import replication
from spate.storage.sources.postgres.catalog import (
    check_wal_level,
    connect,
    describe_table,
    split_table_name,
)
from spate.storage.sources.postgres.changes import Transaction, decode_transactions, updates_of
from spate.storage.sources.postgres.config import PostgresConnection, PostgresTable
from spate.storage.sources.postgres.types import (
    SESSION_SETTINGS,
    empty_table,
    text_to_table,
    values_to_columns,
)
from spate.storage.sources.source import IntPoints, SourceChunk, SourceError
from spate.storage.sources.stash import Stash, get_snapshot, put_snapshot

LSN_DESC: Final = RelationDesc.of(("lsn", INT64, False))
SNAPSHOT_BATCH_ROWS: Final = 50_000


class PostgresReader(IntPoints):
    """A running PostgreSQL source (blocking calls: run it off the event loop).

    ``exports`` maps each exported table (``"schema.table"``) to the schema its collection
    has; :meth:`validate` (run before the first poll) checks every table upstream against it.
    """

    POINT_NAME = "lsn"

    def __init__(
        self,
        source: PostgresSource,
        exports: Mapping[str, RelationDesc],
        stash: Stash,
        *,
        max_changes_per_poll: int = 100_000,
    ) -> None:
        if not exports:
            raise SourceError("a PostgreSQL source needs at least one table")
        self._source = source
        self._exports = dict(exports)
        self._stash = stash
        self._max_changes = max_changes_per_poll
        self._conn: replication.Conn | None = None
        self._resolved: PostgresConnection | None = None
        # The WAL position below which every transaction is durable downstream (see
        # :meth:`covered_offset`), and the one the last poll covers once its point commits.
        self._covered = 0
        self._pending: tuple[int, int] | None = None

    @classmethod
    def from_connection(cls, connection: PostgresConnection, stash: Stash) -> PostgresReader:
        """A reader for a source described with :func:`.catalog.describe_source`."""
        source = PostgresSource(Secret(connection.url), connection.publication, connection.slot)
        reader = cls(source, connection.outputs(), stash)
        return reader

    @property
    def _config(self) -> PostgresConnection:
        if self._resolved is None:
            self.validate()
        assert self._resolved is not None
        return self._resolved

    # -- connections --------------------------------------------------------------------------

    def _db(self) -> replication.Conn:
        if self._conn is None or self._conn.closed:
            conn = connect(self._source.connection.reveal())
            for sql in SESSION_SETTINGS:
                conn.execute(sql)
            self._conn = conn
        return self._conn

    def validate(self) -> None:
        """Check that every exported table upstream still has its export's schema."""
        conn = self._db()
        check_wal_level(conn)
        tables = []
        for reference, desc in self._exports.items():
            table = describe_table(conn, *split_table_name(reference))
            if table.desc != desc:
                raise SourceError(
                    f"table {reference} changed upstream since the source was created: "
                    f"columns were {desc}, now {table.desc}; recreate the source"
                )
            tables.append(table)
        self._resolved = PostgresConnection(
            self._source.connection.reveal(),
            self._source.publication,
            self._source.slot,
            tuple(tables),
            self._max_changes,
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- SourceReader[int] --------------------------------------------------------------------

    @property
    def outputs(self) -> Mapping[str, RelationDesc]:
        return self._exports

    @property
    def progress_desc(self) -> RelationDesc:
        return LSN_DESC

    def poll(self, lower: int, *, now_millis: int) -> SourceChunk[int] | None:
        if self._resolved is None:
            self.validate()
        if lower == 0:
            chunk = self._snapshot()
            self._pending = (chunk.upper, chunk.upper)
            return chunk
        position = replication.slot_position(self._db(), self._config.slot)
        if position is None:
            raise SourceError(f"replication slot {self._config.slot!r} is missing upstream")
        limit = self._config.max_changes_per_poll if position >= lower else None
        # Every transaction whose commit is flushed before ``flushed`` is in a peek that runs
        # to the end of the WAL (not stopped by ``limit``).
        flushed = replication.flush_position(self._db())
        txns, complete = self._poll_transactions(lower, limit)
        point = txns[-1].end_lsn if txns else lower
        self._pending = (point, max(flushed, point) if complete else point)
        if not txns:
            return None
        return SourceChunk(point, updates_of(self._config.tables, txns))

    def covered_offset(self) -> int:
        """The WAL position below which every transaction upstream committed is durable
        downstream (its changes, if the publication has any, are in a committed chunk): at
        least the committed point, and beyond it when later WAL holds nothing for the source.
        Real-time recency compares it with the server's WAL position."""
        return self._covered

    def replay(self, lower: int, upper: int) -> SourceChunk[int]:
        if upper < lower:
            raise SourceError(f"PostgreSQL source: replay [{lower}, {upper}) is not an interval")
        parts: dict[str, list[pa.Table]] = {}
        if lower == 0 and upper > 0:
            snapshot_lsn, tables = self._read_stash()
            if snapshot_lsn > upper:
                raise SourceError(
                    f"PostgreSQL source: the stashed snapshot is at {snapshot_lsn}, beyond {upper}"
                )
            for name, table in tables.items():
                parts.setdefault(name, []).append(table)
            lower = snapshot_lsn
        if upper > lower:
            txns = self._transactions(lower, upto_lsn=upper)
            txns = [t for t in txns if t.end_lsn <= upper]
            if not txns or txns[-1].end_lsn != upper:
                raise SourceError(
                    f"PostgreSQL source: the changes between LSN {lower} and {upper} are no "
                    f"longer in replication slot {self._config.slot!r} (advanced or dropped?)"
                )
            for name, table in updates_of(self._config.tables, txns).items():
                parts.setdefault(name, []).append(table)
        return SourceChunk(upper, {k: pa.concat_tables(v) for k, v in parts.items()})

    def committed(self, point: int) -> None:
        if self._pending is not None and point >= self._pending[0]:
            self._covered = max(self._covered, point, self._pending[1])
            self._pending = None
        self._covered = max(self._covered, point)
        if point <= 0:
            return
        replication.advance_slot(self._db(), self._config.slot, point)
        manifest = self._stash.get(self._manifest_key())
        if manifest is not None and point >= int(json.loads(manifest)["lsn"]):
            self._stash.delete_prefix(self._stash_prefix())

    def drop_upstream(self) -> None:
        """Drop the replication slot and any stashed snapshot (the source is dropped)."""
        replication.drop_slot(self._db(), self._source.slot)
        self._stash.delete_prefix(self._stash_prefix())

    # -- the snapshot ---------------------------------------------------------------------------

    def _stash_prefix(self) -> str:
        return f"postgres/{self._source.slot}"

    def _manifest_key(self) -> str:
        return f"{self._stash_prefix()}/manifest.json"

    def _snapshot(self) -> SourceChunk[int]:
        """Create the slot, read every table in its snapshot, stash it, return it."""
        db = self._db()
        # A slot without a binding is left over from a crash before the snapshot was bound:
        # nothing refers to it, so start afresh.
        replication.drop_slot(db, self._config.slot)
        self._stash.delete_prefix(self._stash_prefix())
        tables: dict[str, pa.Table] = {}
        with (
            replication.create_slot(self._config.url, self._config.slot) as created,
            connect(self._config.url) as reader,
        ):
            reader.execute("begin isolation level repeatable read")
            reader.execute(
                sql.SQL("set transaction snapshot {}").format(sql.Literal(created.snapshot_name))
            )
            for setting in SESSION_SETTINGS:
                reader.execute(setting)
            for table in self._config.tables:
                tables[table.output] = self._read_table(reader, table)
            reader.execute("commit")
            lsn = created.consistent_lsn
        put_snapshot(
            self._stash,
            self._stash_prefix(),
            [(t.output, tables[t.output]) for t in self._config.tables],
            {"lsn": lsn},
        )
        return SourceChunk(lsn, {k: v for k, v in tables.items() if v.num_rows})

    def _read_table(self, conn: replication.Conn, table: PostgresTable) -> pa.Table:
        """Every row of ``table`` in the transaction's snapshot, each value in its text form
        (the ``::text`` cast runs the type's output function, as pgoutput does), in batches
        through a server-side cursor."""
        query = sql.SQL("select {} from {}.{}").format(
            sql.SQL(", ").join(
                sql.SQL("{}::text").format(sql.Identifier(c)) for c in table.desc.names
            ),
            sql.Identifier(table.schema),
            sql.Identifier(table.name),
        )
        parts: list[pa.Table] = []
        with conn.cursor(name="spate_snapshot") as cur:
            cur.execute(query)
            while batch := cur.fetchmany(SNAPSHOT_BATCH_ROWS):
                columns = values_to_columns(batch, table.desc.arity)  # type: ignore[arg-type]
                parts.append(
                    text_to_table(table.desc, table.type_oids, columns, table=table.output)
                )
        if not parts:
            return empty_table(table.desc)
        return pa.concat_tables(parts)

    def _read_stash(self) -> tuple[int, dict[str, pa.Table]]:
        found = get_snapshot(self._stash, self._stash_prefix(), "PostgreSQL source")
        if found is None:
            raise SourceError(
                f"PostgreSQL source: the snapshot of slot {self._config.slot!r} is bound but "
                "no longer stashed; recreate the source"
            )
        manifest, tables = found
        return int(manifest["lsn"]), tables

    # -- the change stream ------------------------------------------------------------------

    def _poll_transactions(self, lower: int, limit: int | None) -> tuple[list[Transaction], bool]:
        """The transactions after ``lower`` (at most about ``limit`` changes), and whether the
        peek ran to the end of the WAL."""
        messages = list(
            replication.peek_changes(
                self._db(), self._config.slot, self._config.publication, upto_changes=limit
            )
        )
        txns = decode_transactions(self._config.tables, messages)
        complete = limit is None or len(messages) < limit
        return [t for t in txns if t.commit_lsn >= lower], complete

    def _transactions(
        self, lower: int, *, upto_lsn: int | None = None, upto_changes: int | None = None
    ) -> list[Transaction]:
        messages = replication.peek_changes(
            self._db(),
            self._config.slot,
            self._config.publication,
            upto_lsn=upto_lsn,
            upto_changes=upto_changes,
        )
        txns = decode_transactions(self._config.tables, messages)
        return [t for t in txns if t.commit_lsn >= lower]
