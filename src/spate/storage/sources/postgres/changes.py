"""From pgoutput messages to transactions of updates (pure).

Every committed transaction becomes ``Transaction(commit_lsn, end_lsn, changes)``; a change is
``(output, diff, values)`` with the text values of one row: an insert is ``+1`` of the new row,
a delete ``-1`` of the old row, an update ``-1`` of the old row and ``+1`` of the new row (an
unchanged TOASTed value of the new row is taken from the old row). Changes of relations that
are not among the source's tables are skipped.

The source stops with :class:`~spate.storage.sources.source.SourceError` when a table no longer
matches its description (columns or types changed, replica identity no longer ``FULL``) and on
``TRUNCATE``, which pgoutput sends without the rows it removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from spate.storage.sources.postgres import pgoutput as pg
from spate.storage.sources.postgres.config import PostgresTable
from spate.storage.sources.postgres.types import text_to_table, values_to_columns
from spate.storage.sources.source import SourceError

Values = tuple[bytes | None, ...]


@dataclass(slots=True)
class Transaction:
    commit_lsn: int
    end_lsn: int
    changes: list[tuple[str, int, Values]] = field(default_factory=list)


class ChangeDecoder:
    """Assembles transactions from a stream of decoded messages."""

    def __init__(self, tables: Sequence[PostgresTable]) -> None:
        self._tables = {(t.schema, t.name): t for t in tables}
        self._relations: dict[int, PostgresTable | None] = {}
        self._open: list[tuple[str, int, Values]] | None = None

    def _table(self, oid: int) -> PostgresTable | None:
        if oid not in self._relations:
            raise SourceError(f"pgoutput: change for relation {oid} before its Relation message")
        return self._relations[oid]

    def _relation(self, msg: pg.Relation) -> None:
        table = self._tables.get((msg.namespace, msg.name))
        if table is not None:
            names = tuple(c.name for c in msg.columns)
            oids = tuple(c.type_oid for c in msg.columns)
            if names != table.desc.names or oids != table.type_oids:
                raise SourceError(
                    f"table {table.output} changed upstream: columns were "
                    f"({', '.join(table.desc.names)}) with type oids {table.type_oids}, now "
                    f"({', '.join(names)}) with type oids {oids}; recreate the source"
                )
            if msg.replica_identity != "f":
                raise SourceError(
                    f"table {table.output}: replica identity changed upstream to "
                    f"{msg.replica_identity!r}; spate needs REPLICA IDENTITY FULL"
                )
        self._relations[msg.oid] = table

    def _row(self, table: PostgresTable, values: tuple[pg.TupleValue, ...], what: str) -> Values:
        if len(values) == table.desc.arity and pg.UNCHANGED_TOAST not in values:
            return values  # type: ignore[return-value]  # bytes | None only (the hot path)
        if len(values) != table.desc.arity:
            raise SourceError(
                f"table {table.output}: {what} has {len(values)} values, expected "
                f"{table.desc.arity}"
            )
        out: list[bytes | None] = []
        for c, v in zip(table.desc.columns, values, strict=True):
            if v is pg.UNCHANGED_TOAST:
                raise SourceError(f"table {table.output}, column {c.name!r}: {what} lacks a value")
            assert v is None or isinstance(v, bytes)
            out.append(v)
        return tuple(out)

    def _old_row(self, table: PostgresTable, kind: str | None, old: object, what: str) -> Values:
        if kind != "O" or not isinstance(old, tuple):
            raise SourceError(
                f"table {table.output}: {what} without the old row; spate needs REPLICA "
                "IDENTITY FULL"
            )
        return self._row(table, old, f"the old row of {what}")

    def feed(self, msg: pg.Message) -> Transaction | None:
        """Apply one message; a ``Commit`` returns the finished transaction."""
        if isinstance(msg, pg.Relation):
            self._relation(msg)
            return None
        if isinstance(msg, pg.Begin):
            if self._open is not None:
                raise SourceError("pgoutput: Begin inside an open transaction")
            self._open = []
            return None
        if isinstance(msg, pg.Commit):
            if self._open is None:
                raise SourceError("pgoutput: Commit without Begin")
            txn = Transaction(msg.commit_lsn, msg.end_lsn, self._open)
            self._open = None
            return txn
        if isinstance(msg, (pg.Origin, pg.TypeMessage, pg.LogicalMessage)):
            return None
        changes = self._open
        if changes is None:
            raise SourceError(f"pgoutput: {type(msg).__name__} outside a transaction")
        if isinstance(msg, pg.Insert):
            table = self._table(msg.oid)
            if table is not None:
                changes.append((table.output, 1, self._row(table, msg.new, "an insert")))
        elif isinstance(msg, pg.Update):
            table = self._table(msg.oid)
            if table is not None:
                old = self._old_row(table, msg.old_kind, msg.old, "an update")
                new = tuple(
                    o if v is pg.UNCHANGED_TOAST else v for o, v in zip(old, msg.new, strict=False)
                )
                changes.append((table.output, -1, old))
                changes.append((table.output, 1, self._row(table, new, "an update")))
        elif isinstance(msg, pg.Delete):
            table = self._table(msg.oid)
            if table is not None:
                changes.append(
                    (table.output, -1, self._old_row(table, msg.old_kind, msg.old, "a delete"))
                )
        elif isinstance(msg, pg.Truncate):
            names = [t.output for oid in msg.oids if (t := self._relations.get(oid)) is not None]
            if names:
                raise SourceError(
                    f"TRUNCATE of {', '.join(names)} upstream: pgoutput does not send the "
                    "removed rows, so the source cannot retract them; recreate the source"
                )
        return None


def decode_transactions(
    tables: Sequence[PostgresTable], messages: Iterable[bytes]
) -> list[Transaction]:
    """Every complete transaction in ``messages`` (raw pgoutput payloads), in commit order."""
    decoder = ChangeDecoder(tables)
    out = []
    for raw in messages:
        msg = pg.decode_change(raw)
        txn = decoder.feed(msg if msg is not None else pg.decode(raw))
        if txn is not None:
            out.append(txn)
    return out


def updates_of(
    tables: Sequence[PostgresTable], transactions: Iterable[Transaction]
) -> dict[str, pa.Table]:
    """The updates of ``transactions`` per output (data columns and ``_diff``)."""
    by_table: dict[str, tuple[list[Values], list[int]]] = {}
    for txn in transactions:
        for output, diff, values in txn.changes:
            rows, diffs = by_table.setdefault(output, ([], []))
            rows.append(values)
            diffs.append(diff)
    described: Mapping[str, PostgresTable] = {t.output: t for t in tables}
    out = {}
    for output, (rows, diffs) in by_table.items():
        t = described[output]
        out[output] = text_to_table(
            t.desc,
            t.type_oids,
            values_to_columns(rows, t.desc.arity),
            table=output,
            diffs=pa.array(diffs, pa.int64()),
        )
    return out
