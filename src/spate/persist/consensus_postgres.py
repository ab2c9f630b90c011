"""A :class:`~spate.persist.location.Consensus` in a PostgreSQL table (multi-host deployments).

One row per entry, keyed by ``(shard, seqno)``. ``compare_and_set`` is one conditional
``INSERT … SELECT … WHERE max(seqno) IS NOT DISTINCT FROM expected ON CONFLICT DO NOTHING``:
two writers expecting the same head both try to insert the same primary key and exactly one
succeeds, under PostgreSQL's default isolation. ``compare_and_set_many`` runs one such
``INSERT`` per op (in key order, so two batches never wait on each other in a cycle) inside one
transaction: one commit for the batch.

The table (and schema) are created if absent. The URI's ``table`` and ``schema`` query
parameters choose them (default ``consensus`` in the connection's default schema); every other
parameter is passed to libpq. A password in the URI is never printed (prefer ``PGPASSWORD``).

A connection failure while a write was in flight is :class:`~spate.errors.Indeterminate`; every
other failure is :class:`~spate.errors.Determinate`. A broken connection is reopened on the next
call.
"""

from __future__ import annotations

import contextlib
import re
import threading
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from spate.errors import Determinate, Indeterminate
from spate.persist.consensus import (
    CasOp,
    VersionedData,
    check_cas_ops,
    check_consensus_key,
    next_seqno,
    redact_uri,
)
from spate.persist.crash import crash_point
from spate.persist.errors import InvalidLocation, TruncateBeyondHead

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

_IDENT: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresConsensus:
    """Consensus in table ``schema.table`` of the database at ``conninfo``."""

    def __init__(
        self,
        conninfo: str,
        *,
        table: str = "consensus",
        schema: str | None = None,
        connect_timeout_s: int = 10,
    ) -> None:
        for what, name in (("table", table), ("schema", schema)):
            if name is not None and not _IDENT.fullmatch(name):
                raise InvalidLocation(
                    redact_uri(conninfo), f"{what} must match [a-z_][a-z0-9_]*, got {name!r}"
                )
        self._conninfo = conninfo
        self._table = table
        self._schema = schema
        self._connect_timeout = connect_timeout_s
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self.commits = 0
        """Compare-and-set transactions this object committed (one per batch)."""
        with self._lock:
            self._connection()

    @staticmethod
    def from_uri(uri: str) -> PostgresConsensus:
        parts = urllib.parse.urlsplit(uri)
        params = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        ours = {k: v for k, v in params if k in ("table", "schema")}
        rest = [(k, v) for k, v in params if k not in ("table", "schema")]
        scheme = "postgresql"
        conninfo = urllib.parse.urlunsplit(
            parts._replace(scheme=scheme, query=urllib.parse.urlencode(rest))
        )
        return PostgresConsensus(
            conninfo, table=ours.get("table", "consensus"), schema=ours.get("schema")
        )

    def __repr__(self) -> str:
        return f"PostgresConsensus({redact_uri(self._conninfo)!r}, table={self._qualified()!r})"

    def _qualified(self) -> str:
        return f"{self._schema}.{self._table}" if self._schema else self._table

    def _connection(self) -> psycopg.Connection[tuple[object, ...]]:
        import psycopg

        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._conn = None
        try:
            conn = psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=self._connect_timeout
            )
        except psycopg.Error as e:
            raise Determinate(
                f"postgres consensus: cannot connect to {redact_uri(self._conninfo)}: "
                f"{type(e).__name__}"
            ) from None
        try:
            self._create(conn)
        except psycopg.Error as e:
            conn.close()
            raise Determinate(f"postgres consensus: cannot create {self._qualified()}: {e}") from e
        self._conn = conn
        return conn

    def _create(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        import psycopg
        from psycopg import sql

        stmts = []
        if self._schema:
            stmts.append(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
            )
        stmts.append(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (shard text NOT NULL, seqno bigint NOT NULL,"
                " data bytea NOT NULL, PRIMARY KEY (shard, seqno))"
            ).format(self._ident())
        )
        for stmt in stmts:
            # Another process may create it at the same moment.
            with contextlib.suppress(
                psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject
            ):
                conn.execute(stmt)

    def _ident(self) -> sql.Identifier:
        from psycopg import sql

        if self._schema:
            return sql.Identifier(self._schema, self._table)
        return sql.Identifier(self._table)

    def _run(
        self, what: str, query: sql.Composed, params: tuple[object, ...], *, write: bool
    ) -> psycopg.Cursor[tuple[object, ...]]:
        import psycopg

        conn = self._connection()
        try:
            return conn.execute(query, params)
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            try:
                conn.close()
            finally:
                self._conn = None
            cls = Indeterminate if write else Determinate
            raise cls(f"postgres consensus: {what} failed: {e}") from e
        except psycopg.Error as e:
            raise Determinate(f"postgres consensus: {what} failed: {e}") from e

    def head(self, key: str) -> VersionedData | None:
        from psycopg import sql

        check_consensus_key(key)
        q = sql.SQL(
            "SELECT seqno, data FROM {} WHERE shard = %s ORDER BY seqno DESC LIMIT 1"
        ).format(self._ident())
        with self._lock:
            row = self._run(f"head({key})", q, (key,), write=False).fetchone()
        if row is None:
            return None
        seqno, data = row
        assert isinstance(seqno, int) and isinstance(data, (bytes, memoryview))
        return VersionedData(seqno, bytes(data))

    def _cas_query(self) -> sql.Composed:
        from psycopg import sql

        return sql.SQL(
            "INSERT INTO {t} (shard, seqno, data) SELECT %s, %s, %s"
            " WHERE (SELECT max(seqno) FROM {t} WHERE shard = %s)"
            " IS NOT DISTINCT FROM %s::bigint ON CONFLICT DO NOTHING"
        ).format(t=self._ident())

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        check_consensus_key(key)
        with self._lock:
            cur = self._run(
                f"cas({key})",
                self._cas_query(),
                (key, next_seqno(expected), bytes(data), key, expected),
                write=True,
            )
            self.commits += 1
            return cur.rowcount == 1

    def compare_and_set_many(self, ops: Sequence[CasOp]) -> list[bool]:
        import psycopg

        ops = check_cas_ops(ops)
        if not ops:
            return []
        what = f"cas({ops[0].key if len(ops) == 1 else f'{len(ops)} keys'})"
        q = self._cas_query()
        out = [False] * len(ops)
        order = sorted(range(len(ops)), key=lambda i: ops[i].key)
        with self._lock:
            conn = self._connection()
            committing = False
            try:
                with conn.transaction():
                    for i in order:
                        op = ops[i]
                        params = (op.key, next_seqno(op.expected), bytes(op.data), op.key)
                        cur = conn.execute(q, (*params, op.expected))
                        out[i] = cur.rowcount == 1
                        if i == order[0] and len(ops) > 1:
                            crash_point("consensus.mid_batch_cas")
                    committing = True  # leaving the block commits
            except psycopg.Error as e:
                if isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError)):
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
                    self._conn = None
                # Before COMMIT was sent nothing can have committed; from then on, anything.
                cls = Indeterminate if committing else Determinate
                raise cls(f"postgres consensus: {what} failed: {e}") from e
            self.commits += 1
            return out

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        from psycopg import sql

        check_consensus_key(key)
        q = sql.SQL(
            "SELECT seqno, data FROM {} WHERE shard = %s AND seqno >= %s ORDER BY seqno LIMIT %s"
        ).format(self._ident())
        with self._lock:
            rows = self._run(f"scan({key})", q, (key, from_seqno, limit), write=False).fetchall()
        out = []
        for seqno, data in rows:
            assert isinstance(seqno, int) and isinstance(data, (bytes, memoryview))
            out.append(VersionedData(seqno, bytes(data)))
        return out

    def truncate(self, key: str, seqno: int) -> int:
        from psycopg import sql

        check_consensus_key(key)
        with self._lock:
            row = self._run(
                f"truncate({key})",
                sql.SQL("SELECT max(seqno) FROM {} WHERE shard = %s").format(self._ident()),
                (key,),
                write=False,
            ).fetchone()
            head = None if row is None else row[0]
            assert head is None or isinstance(head, int)
            if head is None or seqno > head:
                raise TruncateBeyondHead(key, seqno, head)
            cur = self._run(
                f"truncate({key})",
                sql.SQL("DELETE FROM {} WHERE shard = %s AND seqno < %s").format(self._ident()),
                (key, seqno),
                write=True,
            )
            return cur.rowcount

    def list_keys(self) -> list[str]:
        from psycopg import sql

        with self._lock:
            rows = self._run(
                "list_keys",
                sql.SQL("SELECT DISTINCT shard FROM {} ORDER BY shard").format(self._ident()),
                (),
                write=False,
            ).fetchall()
        return [str(r[0]) for r in rows]

    def drop_table(self) -> None:
        """Drop the table (tests use it to clean up their private table)."""
        from psycopg import sql

        with self._lock:
            self._run(
                "drop", sql.SQL("DROP TABLE IF EXISTS {}").format(self._ident()), (), write=True
            )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
