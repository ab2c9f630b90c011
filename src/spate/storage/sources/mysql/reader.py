"""The MySQL source: a consistent snapshot, then the transactions of MariaDB's binlog.

Resume points are GTID positions (:mod:`.binlog`). The snapshot of every table is read in one
``START TRANSACTION WITH CONSISTENT SNAPSHOT``, whose binlog coordinates (MariaDB's
``binlog_snapshot_file``/``_position``) become a GTID position ``G0`` with ``BINLOG_GTID_POS``:
the snapshot holds exactly the transactions before ``G0`` and the binlog streamed from ``G0``
exactly those after. Each later chunk ends at the GTID position after its last transaction.
Progress rows are ``(domain, server_id, seq)``, one per replication domain, plus the row
``(-1, 0, 0)`` once the snapshot is taken.

Determinism (see :mod:`spate.storage.sources.source`): the snapshot is read once and stashed
durably (:mod:`spate.storage.sources.stash`) before :meth:`MySqlReader.poll` returns it, and
:meth:`~MySqlReader.replay` of ``[(), P)`` reads the stash; the binlog is immutable, so the
transactions between two GTID positions are the same on every read, as long as the server
keeps the binlog files (``expire_logs_days``/``binlog_expire_logs_seconds`` must leave time
for restarts; a purged position is an error naming it).

A table that fails upstream (:mod:`.binlog`: an incompatible ALTER, a TRUNCATE, a DROP) stops
alone: its output receives nothing after the failing transaction and the ``errors`` output
(:data:`~.catalog.ERRORS_OUTPUT`) receives one row ``(table, message)`` in the chunk of that
transaction; the other tables go on. The failing transaction's GTID is stashed (under
``mysql-failed/``) before the chunk is returned, so a read that starts after it skips the table
without a second error row, and a replay of a range that holds it finds the same failure again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import pyarrow as pa
import pymysql

from spate.protocol.mysql import MySqlSource
from spate.protocol.secret import Secret
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, Row
from spate.storage.sources.mysql import binlog
from spate.storage.sources.mysql.binlog import SNAPSHOT_MARK, MySqlPoint, Transaction
from spate.storage.sources.mysql.catalog import (
    ERRORS_DESC,
    ERRORS_OUTPUT,
    Conn,
    MySqlTable,
    check_server,
    connect,
    describe_table,
    settings_of,
    split_table_name,
)
from spate.storage.sources.mysql.types import rows_to_table
from spate.storage.sources.source import SourceChunk, SourceError, SourceUnavailable
from spate.storage.sources.stash import Stash, get_snapshot, put_snapshot

MYSQL_PROGRESS_DESC: Final = RelationDesc.of(
    ("domain", INT64, False), ("server_id", INT64, False), ("seq", INT64, False)
)
SNAPSHOT_BATCH_ROWS: Final = 50_000
_log = logging.getLogger(__name__)
REPLAY_BUDGET_S: Final = 60.0


def binlog_events(
    settings: Mapping[str, Any],
    server_id: int,
    after: MySqlPoint,
    tables: Sequence[MySqlTable],
) -> Iterator[Any]:
    """The binlog's events after the GTIDs of ``after``, and heartbeats once a second when
    there are none: the caller stops reading (the stream blocks at the binlog's end).

    The stream blocks rather than asking the server to end it at the binlog's end: a server
    that ends it resets the connection (mysql-replication sends a longer dump request than it
    declares), which can drop the events still in flight."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings={
            "host": settings["host"],
            "port": settings["port"],
            "user": settings["user"],
            "password": settings["password"],
        },
        server_id=server_id,
        blocking=True,
        slave_heartbeat=1,
        is_mariadb=True,
        auto_position=binlog.gtid_position(after),
        only_events=[
            HeartbeatLogEvent,
            MariadbGtidEvent,
            QueryEvent,
            XidEvent,
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
        ],
        only_schemas=sorted({t.database for t in tables}),
        only_tables=sorted({t.name for t in tables}),
        enable_logging=False,
    )
    try:
        yield from stream
    except pymysql.err.OperationalError as e:
        code = e.args[0] if e.args else None
        if code == 1236:
            raise SourceError(
                f"the MariaDB binlog no longer holds GTID position "
                f"{binlog.gtid_position(after)!r} (purged?): {e.args[-1]}; drop the source and "
                "create it again"
            ) from None
        raise SourceUnavailable(f"reading the MariaDB binlog failed: {e}") from None
    finally:
        stream.close()


class MySqlReader:
    """A running MySQL source (blocking calls: run it off the event loop).

    ``exports`` maps each exported table (``"database.table"``) to the schema its collection
    has; ``stash_key`` names the source's objects in the stash (the remap shard's id).
    """

    def __init__(
        self,
        source: MySqlSource,
        exports: Mapping[str, RelationDesc],
        stash: Stash,
        *,
        stash_key: str,
        max_changes_per_poll: int = 100_000,
        poll_budget_s: float = 2.0,
    ) -> None:
        if not [k for k in exports if k != ERRORS_OUTPUT]:
            raise SourceError("a MySQL source needs at least one table")
        self._source = source
        if not isinstance(source.connection, Secret):
            raise SourceError("a MySQL source's connection secret is not resolved")
        self._settings = settings_of(source.connection.reveal())
        self._exports = dict(exports)
        self._tables_exported = {k: v for k, v in exports.items() if k != ERRORS_OUTPUT}
        self._failed_key = f"mysql-failed/{stash_key}.json"
        self._stash = stash
        self._prefix = f"mysql/{stash_key}"
        self._max_changes = max_changes_per_poll
        self._budget = poll_budget_s
        self._tables: tuple[MySqlTable, ...] | None = None
        self._errors: dict[str, str] = {}  # the failures this reader read: table -> message
        self._failed: dict[str, binlog.Gtid] | None = None  # the stashed failures, once read

    # -- tables ---------------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the server and that every exported table upstream still has its schema."""
        conn = connect(self._settings)
        try:
            check_server(conn)
            tables = []
            for reference, desc in self._tables_exported.items():
                table = describe_table(conn, *split_table_name(reference))
                if table.desc != desc:
                    raise SourceError(
                        f"table {reference} changed upstream since the source was created: "
                        f"columns were {desc}, now {table.desc}; drop the source and create "
                        "it again"
                    )
                tables.append(table)
        finally:
            conn.close()
        self._tables = tuple(tables)

    @property
    def tables(self) -> tuple[MySqlTable, ...]:
        if self._tables is None:
            # Replays and the change stream check each table against the binlog's table maps
            # (the schema then, not now): describe them from the exports alone.
            self._tables = tuple(
                MySqlTable(*split_table_name(ref), desc)
                for ref, desc in self._tables_exported.items()
            )
        return self._tables

    # -- SourceReader[MySqlPoint] ---------------------------------------------------------------

    @property
    def outputs(self) -> Mapping[str, RelationDesc]:
        return self._exports

    @property
    def progress_desc(self) -> RelationDesc:
        return MYSQL_PROGRESS_DESC

    def minimum(self) -> MySqlPoint:
        return ()

    def less_equal(self, a: MySqlPoint, b: MySqlPoint) -> bool:
        return binlog.less_equal(a, b)

    def progress_rows(self, point: MySqlPoint) -> list[Row]:
        return [tuple(g) for g in point]

    def point_from_rows(self, rows: Sequence[Row]) -> MySqlPoint:
        point = []
        for r in rows:
            if len(r) != 3 or not all(isinstance(v, int) for v in r):
                raise SourceError(
                    f"MySQL source: a progress row is (domain, server_id, seq): {r!r}"
                )
            d, s, n = r
            assert isinstance(d, int) and isinstance(s, int) and isinstance(n, int)
            point.append((d, s, n))
        domains = [g[0] for g in point]
        if len(set(domains)) != len(domains):
            raise SourceError(f"MySQL source: progress names a domain twice: {rows!r}")
        return tuple(sorted(point))

    def poll(self, lower: MySqlPoint, *, now_millis: int) -> SourceChunk[MySqlPoint] | None:
        if not lower:
            self.validate()
            return self._snapshot()
        target = self._binlog_position()
        if binlog.less_equal(target, lower):
            return None  # nothing committed upstream since
        failed = self._failed_at()
        txns, point = binlog.read_transactions(
            binlog_events(self._settings, self._source.server_id, lower, self.tables),
            self.tables,
            lower,
            upto=target,
            max_changes=self._max_changes,
            budget_s=self._budget,
            failed=self._failed_before(failed, lower),
        )
        if point == lower:
            return None
        new = {t: txn.gtid for txn in txns for t, _ in txn.failures}
        if new:
            self._stash.put(
                self._failed_key,
                json.dumps({t: list(g) for t, g in {**failed, **new}.items()}).encode(),
            )
            self._failed = {**failed, **new}
        return SourceChunk(point, self._updates(txns))

    def replay(self, lower: MySqlPoint, upper: MySqlPoint) -> SourceChunk[MySqlPoint]:
        if not binlog.less_equal(lower, upper):
            raise SourceError(f"MySQL source: replay [{lower}, {upper}) is not an interval")
        parts: dict[str, list[pa.Table]] = {}
        if not lower and upper:
            snapshot_point, tables = self._read_stash()
            if not binlog.less_equal(snapshot_point, upper):
                raise SourceError(
                    f"MySQL source: the stashed snapshot is at {snapshot_point}, beyond {upper}"
                )
            for name, table in tables.items():
                parts.setdefault(name, []).append(table)
            lower = snapshot_point
        point = lower
        failed = self._failed_before(self._failed_at(), lower)
        while point != upper:
            txns, reached = binlog.read_transactions(
                binlog_events(self._settings, self._source.server_id, point, self.tables),
                self.tables,
                point,
                upto=upper,
                budget_s=REPLAY_BUDGET_S,
                failed=failed,
            )
            failed |= {t for txn in txns for t, _ in txn.failures}
            if reached == point or not binlog.less_equal(reached, upper):
                raise SourceError(
                    f"MySQL source: the binlog between GTID positions "
                    f"{binlog.gtid_position(lower)!r} and {binlog.gtid_position(upper)!r} "
                    f"ends at {binlog.gtid_position(reached)!r} (purged or rewritten?)"
                )
            point = reached
            for name, table in self._updates(txns).items():
                parts.setdefault(name, []).append(table)
        return SourceChunk(upper, {k: pa.concat_tables(v) for k, v in parts.items()})

    def committed(self, point: MySqlPoint) -> None:
        if not point:
            return
        manifest = self._stash.get(self._manifest_key())
        if manifest is not None:
            at = tuple((int(d), int(s), int(n)) for d, s, n in json.loads(manifest)["point"])
            if binlog.less_equal(at, point):
                self._stash.delete_prefix(self._prefix)

    def close(self) -> None:
        pass

    def _binlog_position(self) -> MySqlPoint:
        """The server's binlog GTID position now (what a poll reads up to)."""
        conn = connect(self._settings)
        try:
            with conn.cursor() as cur:
                cur.execute("select @@gtid_binlog_pos")
                row = cur.fetchone()
        except pymysql.err.MySQLError as e:
            raise SourceUnavailable(f"cannot read the MariaDB binlog position: {e}") from None
        finally:
            conn.close()
        return (SNAPSHOT_MARK, *binlog.parse_gtid_position(str(row[0] or "") if row else ""))

    def drop_upstream(self) -> None:
        """Forget the stashed snapshot and failures (the source is dropped); nothing is held
        upstream."""
        self._stash.delete_prefix(self._prefix)
        self._stash.delete_prefix(self._failed_key)
        self._failed = None

    # -- tables that failed ---------------------------------------------------------------------

    def _failed_at(self) -> dict[str, binlog.Gtid]:
        """Each table that failed, with the GTID of the transaction where it did."""
        data = self._stash.get(self._failed_key)
        if data is None:
            return {}
        return {t: (int(g[0]), int(g[1]), int(g[2])) for t, g in json.loads(data).items()}

    def failed_outputs(self, point: MySqlPoint) -> dict[str, str]:
        """Each table that failed at or before ``point``, with its error (a table that failed
        in an earlier process, whose message only its ``errors`` row keeps, is named with the
        transaction where it failed)."""
        if self._failed is None:
            self._failed = self._failed_at()
        out = {}
        for t, g in self._failed.items():
            if point and binlog.less_equal((g,), point):
                gtid = binlog.gtid_position((g,))
                out[t] = self._errors.get(t) or f"table {t} stopped at transaction {gtid}"
        return out

    @staticmethod
    def _failed_before(failed: Mapping[str, binlog.Gtid], point: MySqlPoint) -> set[str]:
        """The tables whose failing transaction is within ``point`` (read before it)."""
        return {t for t, g in failed.items() if point and binlog.less_equal((g,), point)}

    # -- the snapshot ---------------------------------------------------------------------------

    def _manifest_key(self) -> str:
        return f"{self._prefix}/manifest.json"

    def _snapshot(self) -> SourceChunk[MySqlPoint]:
        """Read every table in one consistent snapshot, stash it, return it."""
        self._stash.delete_prefix(self._prefix)
        tables: dict[str, pa.Table] = {}
        conn = connect(self._settings)
        try:
            with conn.cursor() as cur:
                cur.execute("set session transaction isolation level repeatable read")
                cur.execute("start transaction with consistent snapshot")
                cur.execute("show status like 'binlog_snapshot_%'")
                status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
                cur.execute(
                    "select binlog_gtid_pos(%s, %s)",
                    (status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])),
                )
                row = cur.fetchone()
                gtids = binlog.parse_gtid_position(str(row[0] or "") if row else "")
                for table in self.tables:
                    tables[table.output] = self._read_table(conn, table)
                cur.execute("commit")
        except pymysql.err.OperationalError as e:
            raise SourceUnavailable(f"the MySQL snapshot failed: {e}") from None
        finally:
            conn.close()
        point: MySqlPoint = tuple(sorted((SNAPSHOT_MARK, *gtids)))
        put_snapshot(
            self._stash,
            self._prefix,
            [(t.output, tables[t.output]) for t in self.tables],
            {"point": [list(g) for g in point]},
        )
        return SourceChunk(point, {k: v for k, v in tables.items() if v.num_rows})

    def _read_table(self, conn: Conn, table: MySqlTable) -> pa.Table:
        columns = ", ".join(f"`{c.replace('`', '``')}`" for c in table.desc.names)
        parts: list[pa.Table] = []
        with conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(f"select {columns} from {table.sql_name}")  # noqa: S608 (quoted names)
            while batch := cur.fetchmany(SNAPSHOT_BATCH_ROWS):
                parts.append(rows_to_table(table.desc, batch, table=table.output))
        if not parts:
            return rows_to_table(table.desc, [], table=table.output)
        return pa.concat_tables(parts)

    def _read_stash(self) -> tuple[MySqlPoint, dict[str, pa.Table]]:
        found = get_snapshot(self._stash, self._prefix, "MySQL source")
        if found is None:
            raise SourceError(
                "MySQL source: the snapshot is bound but no longer stashed; drop the source and "
                "create it again"
            )
        manifest, tables = found
        point = tuple(sorted((int(d), int(s), int(n)) for d, s, n in manifest["point"]))
        return point, tables

    # -- changes --------------------------------------------------------------------------------

    def _updates(self, txns: Sequence[Transaction]) -> dict[str, pa.Table]:
        by_table: dict[str, tuple[list[tuple[Any, ...]], list[int]]] = {}
        for txn in txns:
            for output, diff, values in txn.changes:
                rows, diffs = by_table.setdefault(output, ([], []))
                rows.append(values)
                diffs.append(diff)
        described = {t.output: t for t in self.tables}
        out = {
            output: rows_to_table(described[output].desc, rows, table=output, diffs=diffs)
            for output, (rows, diffs) in by_table.items()
        }
        failures = [f for txn in txns for f in txn.failures]
        for table, message in failures:
            _log.warning("MySQL source: %s", message)
            self._errors[table] = message
        if failures and ERRORS_OUTPUT in self._exports:
            out[ERRORS_OUTPUT] = rows_to_table(
                ERRORS_DESC, failures, table=ERRORS_OUTPUT, diffs=[1] * len(failures)
            )
        return out
