"""GTID positions, and reading whole transactions of the binlog after one (pure but for the
stream it is given).

A resume point is a MariaDB GTID position: per replication domain the last transaction read,
``(domain, server_id, sequence)``, sorted by domain. ``()`` is "nothing read"; a point that
holds :data:`SNAPSHOT_MARK` has its snapshot taken (the snapshot may be at an empty GTID
position, a server that never wrote a transaction). Within a domain, sequence numbers grow in
binlog order, so points are ordered domain-wise by sequence.

Transactions are read from a ``pymysqlreplication`` stream that starts after a point's GTIDs
(MariaDB's ``slave_connect_state``): a ``GTID`` event opens one, an ``XID`` event (or a
``COMMIT`` query of a non-transactional engine) closes it, and a standalone one (DDL) ends with
its statement. Row events of the source's tables become changes: an insert ``+1`` of the row, a
delete ``-1``, an update ``-1`` of the old row and ``+1`` of the new one. Before every row
event the table map is checked against the table's description. A table whose columns no longer
map to what the source stores, or that was truncated or dropped, *fails*: the transaction where
that shows records a failure ``(table, message)``, and the table's later events are skipped
(the other tables go on). A table that failed in an earlier read is passed in as ``failed``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from spate.storage.sources.mysql.catalog import MySqlTable
from spate.storage.sources.mysql.types import binlog_column_type
from spate.storage.sources.source import SourceError

Gtid = tuple[int, int, int]
MySqlPoint = tuple[Gtid, ...]
SNAPSHOT_MARK: Final[Gtid] = (-1, 0, 0)


def parse_gtid_position(text: str) -> tuple[Gtid, ...]:
    """``"0-1-42,2-1-7"`` as GTIDs sorted by domain."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            d, s, n = (int(x) for x in part.split("-"))
        except ValueError:
            raise SourceError(f"not a MariaDB GTID: {part!r}") from None
        out.append((d, s, n))
    return tuple(sorted(out))


def gtid_position(point: MySqlPoint) -> str:
    """The GTID position of ``point`` as MariaDB spells it (``""``: from the binlog's start)."""
    return ",".join(f"{d}-{s}-{n}" for d, s, n in point if d >= 0)


def advance(point: MySqlPoint, gtid: Gtid) -> MySqlPoint:
    """``point`` with ``gtid``'s domain at ``gtid``."""
    return tuple(sorted([g for g in point if g[0] != gtid[0]] + [gtid]))


def less_equal(a: MySqlPoint, b: MySqlPoint) -> bool:
    if not a:
        return True
    if not b:
        return False
    seqs = {d: n for d, _, n in b}
    return all(n <= seqs.get(d, 0) for d, _, n in a if d >= 0)


@dataclass(slots=True)
class Transaction:
    gtid: Gtid
    changes: list[tuple[str, int, tuple[Any, ...]]] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    """Tables that fail in this transaction: ``(table, message)`` (see the module docs)."""


_DDL: Final = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(truncate|drop)\s+(?:table\s+)?(?:if\s+exists\s+)?(.+?)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def _ddl_tables(query: str, default_db: str) -> tuple[str, list[str]] | None:
    """``TRUNCATE``/``DROP TABLE`` and the tables they name (``database.table``)."""
    m = _DDL.match(query)
    if m is None:
        return None
    verb = m.group(1).upper()
    rest = m.group(2)
    if verb == "DROP" and not re.match(r"^\s*(?:/\*.*?\*/\s*)*drop\s+table", query, re.I | re.S):
        return None  # DROP DATABASE, DROP INDEX…: not a table (a dropped database's tables
        # stop the source at their next change, which never comes; the source keeps its rows)
    rest = re.sub(r"\s+(restrict|cascade)\s*$", "", rest, flags=re.I)
    names = []
    for raw in rest.split(","):
        parts = [p.strip().strip("`") for p in raw.strip().split(".")]
        if len(parts) == 1:
            names.append(f"{default_db}.{parts[0]}")
        elif len(parts) == 2:
            names.append(f"{parts[0]}.{parts[1]}")
    return verb, names


def _signature(c: Any) -> tuple[Any, ...]:
    return (
        c.name,
        c.type,
        c.unsigned,
        getattr(c, "character_set_name", None),
        getattr(c, "precision", None),
        getattr(c, "decimals", None),
    )


class TransactionReader:
    """Assembles the source's transactions from binlog events."""

    def __init__(self, tables: Iterable[MySqlTable], failed: Iterable[str] = ()) -> None:
        self._tables: Mapping[str, MySqlTable] = {t.output: t for t in tables}
        self._failed: set[str] = set(failed)
        self._checked: set[tuple[str, tuple[Any, ...]]] = set()  # (table, columns) found fine
        self._open: Transaction | None = None
        self._standalone = False

    def _fail(self, txn: Transaction, table: str, message: str) -> None:
        self._failed.add(table)
        txn.failures.append((table, message))

    def _check_map(self, table: MySqlTable, event: Any) -> str | None:
        """``None`` if the event's table map fits the table, else why not."""
        columns = event.columns
        key = (table.output, tuple(_signature(c) for c in columns))
        if key in self._checked:
            return None
        found = []
        for c in columns:
            try:
                t = binlog_column_type(c, table=table.output)
            except SourceError as e:
                found.append(f"{c.name} ({e})")
                continue
            found.append(f"{c.name} {t}")
        wanted = [f"{c.name} {c.type}" for c in table.desc.columns]
        if found != wanted:
            return (
                f"table {table.output} changed upstream in a way the source cannot follow: "
                f"its columns were ({', '.join(wanted)}), they are now ({', '.join(found)}); "
                "drop the source and create it again"
            )
        self._checked.add(key)
        return None

    def feed(self, event: Any) -> Transaction | None:
        """Apply one event; the end of a transaction returns it."""
        name = type(event).__name__
        if name == "MariadbGtidEvent":
            self._open = Transaction(
                (int(event.domain_id), int(event.server_id), int(event.gtid_seq_no))
            )
            self._standalone = bool(int(event.flags) & 1)
            return None
        txn = self._open
        if name == "XidEvent":
            self._open = None
            return txn
        if name == "QueryEvent":
            query = event.query if isinstance(event.query, str) else bytes(event.query).decode()
            schema = event.schema if isinstance(event.schema, str) else bytes(event.schema).decode()
            ddl = _ddl_tables(query, schema)
            if ddl is not None:
                hit = [n for n in ddl[1] if n in self._tables and n not in self._failed]
                if hit and txn is None:
                    raise SourceError(f"binlog: a DDL statement on {hit[0]} outside a transaction")
                what = "truncated" if ddl[0] == "TRUNCATE" else "dropped"
                for n in hit:
                    assert txn is not None
                    self._fail(
                        txn,
                        n,
                        f"table {n} was {what} upstream; the source cannot retract its rows "
                        "from the binlog: drop the source and create it again",
                    )
            if self._standalone or query.strip().upper() == "COMMIT":
                self._open = None
                self._standalone = False
                return txn
            return None
        if name in ("WriteRowsEvent", "UpdateRowsEvent", "DeleteRowsEvent"):
            table = self._tables.get(f"{event.schema}.{event.table}")
            if table is None or table.output in self._failed:
                return None
            if txn is None:
                raise SourceError(f"binlog: a row event of {table.output} outside a transaction")
            problem = self._check_map(table, event)
            if problem is not None:
                self._fail(txn, table.output, problem)
                return None
            names = table.desc.names
            out = table.output
            changes = txn.changes
            if name == "WriteRowsEvent":
                for row in event.rows:
                    v = row["values"]
                    changes.append((out, 1, tuple(v[c] for c in names)))
            elif name == "DeleteRowsEvent":
                for row in event.rows:
                    v = row["values"]
                    changes.append((out, -1, tuple(v[c] for c in names)))
            else:
                for row in event.rows:
                    b, a = row["before_values"], row["after_values"]
                    changes.append((out, -1, tuple(b[c] for c in names)))
                    changes.append((out, 1, tuple(a[c] for c in names)))
        return None


def read_transactions(
    events: Iterable[Any],
    tables: Iterable[MySqlTable],
    lower: MySqlPoint,
    *,
    upto: MySqlPoint | None = None,
    max_changes: int | None = None,
    budget_s: float | None = None,
    failed: Iterable[str] = (),
) -> tuple[list[Transaction], MySqlPoint]:
    """The transactions of ``events`` (a stream starting after ``lower``) and the point after
    the last one: until the stream ends or starts over, ``upto`` is reached, about
    ``max_changes`` changes are read or ``budget_s`` seconds have passed (always at a
    transaction's end). ``failed``: tables that failed before ``lower``."""
    reader = TransactionReader(tables, failed)
    point = lower
    out: list[Transaction] = []
    n = 0
    deadline = None if budget_s is None else time.monotonic() + budget_s
    seqs = {d: n for d, _, n in lower}
    for event in events:
        if type(event).__name__ == "HeartbeatLogEvent":  # the server is idle: stop if due
            if deadline is not None and time.monotonic() > deadline:
                break
            continue
        txn = reader.feed(event)
        if txn is None:
            continue
        domain, _, seq = txn.gtid
        if seq <= seqs.get(domain, 0):
            # The binlog reader reconnected after a lost connection and started over from
            # ``lower``: end here (the caller reads on from ``point``).
            break
        seqs[domain] = seq
        point = advance(point, txn.gtid)
        if txn.changes or txn.failures:
            out.append(txn)
            n += len(txn.changes)
        if upto is not None and less_equal(upto, point):
            break
        if max_changes is not None and n >= max_changes:
            break
        if deadline is not None and time.monotonic() > deadline:
            break
    return out, point
