"""Table writes applied together: ``env.transaction()`` and the writes of a SQL block.

A :class:`Transaction` buffers inserts, updates and deletes of any tables; nothing is written
until :meth:`Transaction.commit`, which hands every table's net change to the group committer
as one transaction (:meth:`~spate.storage.controller.group_commit.GroupCommit.write_all`):
all of it commits at one timestamp, or none of it. It returns once the writes are durable and
visible to every read that starts afterwards. :meth:`Transaction.rollback` (or an exception
out of the ``with`` block) discards the writes.

Rows are checked against their table's columns when they are buffered (a row that does not fit
raises at once and is not buffered). The rows an update or delete removes are checked at
commit, against the table as it is then plus the transaction's own earlier writes: a row
inserted earlier in the same transaction can be updated or deleted. A row that is not there
fails the commit with :class:`~spate.errors.RowsNotFound`, and nothing is written. A table
dropped before the commit fails it too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

from spate.environment import tables
from spate.environment.catalog import TableItem
from spate.environment.runtime import Runtime
from spate.environment.write_result import WriteResult
from spate.errors import TransactionClosed, UsageError, check_argument
from spate.repr.types import Datum, Row
from spate.storage.controller.group_commit import Part, TableContents

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]


class Transaction:
    """Buffered table writes, committed together (module docs). Use ``env.transaction()``.

    Example::

        with env.transaction() as tx:
            tx.insert("orders", [(11, "brownie")])
            tx.update("stock", [(("brownie", 3), ("brownie", 2))])
        # here both writes are durable and visible, at one timestamp (or neither happened)
    """

    def __init__(self, runtime: Runtime, run: Run[Any]) -> None:
        self._rt = runtime
        self._run = run
        self._diffs: dict[str, tuple[TableItem, Counter[Row]]] = {}
        self._rows = 0
        self._open = True

    # -- buffering ----------------------------------------------------------------------------

    def insert(self, name: str, rows: Sequence[Sequence[Datum]]) -> int:
        """Buffer ``env.insert(name, rows)`` (rows as sequences); return how many rows."""
        item, diffs = self._table(name)
        valid = tables._validate(item, tables.as_list(rows, f"the rows to insert into {name}"))
        tables._check(item, valid)
        diffs.update(valid)
        self._rows += len(valid)
        return len(valid)

    def update(self, name: str, changes: Sequence[tuple[Sequence[Datum], Sequence[Datum]]]) -> int:
        """Buffer ``env.update(name, changes)``; return how many pairs."""
        item, diffs = self._table(name)
        pairs = tables.as_list(changes, f"the (old, new) pairs to update in {name}")
        for c in pairs:
            check_argument(c, (list, tuple), f"a change to table {name} (an (old, new) pair)")
            if len(c) != 2:
                raise UsageError(f"a change to table {name} must be an (old, new) pair: {c!r}")
        olds = tables._validate(item, [c[0] for c in pairs])
        news = tables._validate(item, [c[1] for c in pairs])
        tables._check(item, news)
        diffs.subtract(olds)
        diffs.update(news)
        self._rows += len(pairs)
        return len(pairs)

    def delete(self, name: str, rows: Sequence[Sequence[Datum]]) -> int:
        """Buffer ``env.delete(name, rows)`` (each occurrence once); return how many rows."""
        item, diffs = self._table(name)
        valid = tables._validate(item, tables.as_list(rows, f"the rows {name} should lose"))
        diffs.subtract(valid)
        self._rows += len(valid)
        return len(valid)

    def snapshot(self) -> object:
        """What is buffered now, for :meth:`restore` (a SQL savepoint)."""
        return ({n: (item, Counter(d)) for n, (item, d) in self._diffs.items()}, self._rows)

    def restore(self, snapshot: object) -> None:
        """Buffer again exactly what was buffered at :meth:`snapshot`."""
        diffs, rows = cast("tuple[dict[str, tuple[TableItem, Counter[Row]]], int]", snapshot)
        self._diffs = {n: (item, Counter(d)) for n, (item, d) in diffs.items()}
        self._rows = rows

    def tables(self) -> list[str]:
        """The tables written so far, in the order first written."""
        return list(self._diffs)

    def _table(self, name: str) -> tuple[TableItem, Counter[Row]]:
        if not self._open:
            raise TransactionClosed("the transaction was already committed or rolled back")
        if name not in self._diffs:
            self._diffs[name] = (tables.table(self._rt, name), Counter())
        item, diffs = self._diffs[name]
        return item, diffs

    # -- ending -------------------------------------------------------------------------------

    def commit(self) -> WriteResult:
        """Write everything buffered, at one timestamp, once durable and visible; or raise
        and write nothing. The transaction is over either way."""
        if not self._open:
            raise TransactionClosed("the transaction was already committed or rolled back")
        self._open = False
        parts = [_part(item, diffs) for item, diffs in self._diffs.values()]
        self._diffs = {}
        timestamp = self._run(_commit(self._rt, [p for p in parts if p is not None]))
        return WriteResult(timestamp=timestamp, rows=self._rows)

    def rollback(self) -> None:
        """Discard everything buffered; the transaction is over."""
        self._open = False
        self._diffs = {}

    @property
    def open(self) -> bool:
        """Whether the transaction still takes writes (not committed or rolled back)."""
        return self._open

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None and self._open:
            self.commit()
        else:
            self.rollback()


def _part(item: TableItem, diffs: Counter[Row]) -> Part | None:
    """The table's net change as a group-commit part (``None``: no change)."""
    changes = [(r, d) for r, d in diffs.items() if d != 0]
    if not changes:
        return None
    removed = Counter({r: -d for r, d in changes if d < 0})

    def derive(contents: TableContents) -> list[tuple[Row, int]]:
        wanted = list(removed)
        counts = contents.counts(wanted)
        missing = [r for r, n in zip(wanted, counts, strict=True) if n < removed[r]]
        if missing:
            shown = ", ".join(repr(r) for r in missing[:3])
            raise tables.RowsNotFound(
                f"table {item.name}: {len(missing)} row(s) to update or delete not found at "
                f"commit: {shown}"
            )
        return changes

    return (item.id, derive, list(removed), tables._keys(item))


async def _commit(rt: Runtime, parts: list[Part]) -> int:
    if not parts:
        return rt.oracle.read_ts()
    return await rt.commits.write_all(parts)
