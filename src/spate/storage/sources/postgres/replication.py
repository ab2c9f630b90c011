"""Replication slots: creation with an exported snapshot, peeking changes, advancing, dropping.

psycopg 3 does not speak the replication protocol's streaming part, but libpq runs replication
*commands* on a ``replication=database`` connection, which is all slot creation needs:
``CREATE_REPLICATION_SLOT … LOGICAL pgoutput (SNAPSHOT 'export')`` returns the slot's
consistent point and the name of a snapshot that sees exactly the transactions committed before
it. The snapshot lives until the replication connection runs another command or closes, so
:func:`create_slot` keeps it open while the caller reads the tables in a transaction that
imports the snapshot (``SET TRANSACTION SNAPSHOT``).

Changes are then read with ``pg_logical_slot_peek_binary_changes`` (which does not consume
them) and the slot is moved with ``pg_replication_slot_advance`` only once the changes are
durable downstream, so a crash between the two re-reads changes, never loses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import psycopg.pq as pq
from psycopg import conninfo

from spate.storage.sources.postgres.config import quote_ident
from spate.storage.sources.postgres.pgoutput import format_lsn, parse_lsn
from spate.storage.sources.source import SourceError, SourceUnavailable

Conn = psycopg.Connection[tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class SlotSnapshot:
    slot: str
    consistent_lsn: int
    snapshot_name: str


@contextmanager
def create_slot(url: str, slot: str) -> Iterator[SlotSnapshot]:
    """Create logical slot ``slot`` (pgoutput) and keep its exported snapshot alive inside."""
    info = conninfo.make_conninfo(url, replication="database")
    conn = pq.PGconn.connect(info.encode())
    try:
        if conn.status != pq.ConnStatus.OK:
            raise SourceUnavailable(
                "cannot open a replication connection to the PostgreSQL source: "
                + conn.get_error_message(encoding="utf-8")
            )
        command = (
            f"CREATE_REPLICATION_SLOT {quote_ident(slot)} LOGICAL pgoutput (SNAPSHOT 'export')"
        )
        res = conn.exec_(command.encode())
        if res.status != pq.ExecStatus.TUPLES_OK:
            raise SourceError(
                f"cannot create replication slot {slot!r}: "
                + res.get_error_message(encoding="utf-8")
            )
        lsn = res.get_value(0, 1)
        name = res.get_value(0, 2)
        assert lsn is not None and name is not None
        yield SlotSnapshot(slot, parse_lsn(lsn.decode()), name.decode())
    finally:
        conn.finish()


def slot_position(conn: Conn, slot: str) -> int | None:
    """The slot's confirmed LSN, or ``None`` if the slot does not exist."""
    row = conn.execute(
        "select confirmed_flush_lsn::text from pg_replication_slots where slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return None
    return parse_lsn(str(row[0])) if row[0] is not None else 0


def flush_position(conn: Conn) -> int:
    """The server's WAL flush position (``pg_current_wal_flush_lsn()``)."""
    row = conn.execute("select pg_current_wal_flush_lsn()::text").fetchone()
    if row is None:
        raise SourceUnavailable("the PostgreSQL source did not report its WAL position")
    return parse_lsn(str(row[0]))


def drop_slot(conn: Conn, slot: str) -> bool:
    """Drop ``slot`` if it exists; ``True`` if it did."""
    row = conn.execute(
        "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = %s",
        (slot,),
    ).fetchone()
    return row is not None


def peek_changes(
    conn: Conn,
    slot: str,
    publication: str,
    *,
    upto_lsn: int | None = None,
    upto_changes: int | None = None,
) -> Iterator[bytes]:
    """The pgoutput messages of whole transactions after the slot's confirmed position."""
    try:
        cur = conn.execute(
            "select data from pg_logical_slot_peek_binary_changes("
            "%s, %s::pg_lsn, %s, 'proto_version', '1', 'publication_names', %s)",
            (
                slot,
                None if upto_lsn is None else format_lsn(upto_lsn),
                upto_changes,
                quote_ident(publication),
            ),
        )
    except psycopg.errors.UndefinedObject as e:
        raise SourceError(f"replication slot or publication is missing upstream: {e}") from None
    except psycopg.OperationalError as e:
        raise SourceUnavailable(f"reading changes of slot {slot!r} failed: {e}") from None
    for (data,) in cur.fetchall():
        assert isinstance(data, bytes)
        yield data


def advance_slot(conn: Conn, slot: str, lsn: int) -> None:
    """Move the slot's confirmed position to ``lsn`` (no-op if it is already there)."""
    current = slot_position(conn, slot)
    if current is None:
        raise SourceError(f"replication slot {slot!r} does not exist upstream")
    if lsn > current:
        conn.execute("select pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, format_lsn(lsn)))
