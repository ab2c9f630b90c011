"""Table writes and the table tick.

Every table write takes a fresh timestamp from the oracle, appends at it (compare-and-append
on each shard, expected upper = the table's upper), and only then tells the oracle the write is
acknowledged — so a read at ``oracle.read_ts()`` observes it. Writes are serialised by the
runtime's write lock: a delete reads the table's current contents and retracts from them with
no other write in between.

The tick advances every table's upper to a fresh timestamp about once a second (an empty
append), so that reads at the current read timestamp and views over idle tables keep moving.
With no tables it still advances the read timestamp to the wall clock, as an acknowledged empty
write would: a read of source-fed data then observes the present, waiting for the sources'
uppers to pass it, rather than the oldest time still readable.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

from spate.environment.catalog import TableItem, kind_of
from spate.environment.runtime import Runtime
from spate.errors import InvalidArgument, UsageError, check_argument
from spate.errors import RowsNotFound as RowsNotFound
from spate.frontier.antichain import Antichain
from spate.repr.types import Datum, Row
from spate.storage.controller.errors import InvalidUppers

_log: Final = logging.getLogger("spate.environment")
_ATTEMPTS: Final = 5


def table(rt: Runtime, name: str) -> TableItem:
    item = rt.catalog.get(name)
    if not isinstance(item, TableItem):
        raise UsageError(f"{name} is a {kind_of(item)}, not a table: only tables take writes")
    return item


def _validate(item: TableItem, rows: Sequence[Sequence[Datum]]) -> list[Row]:
    return item.desc.validate_rows(rows, collection=f"{item.name} ({item.id})")


async def _write(rt: Runtime, item: TableItem, changes: Sequence[tuple[Row, int]]) -> int:
    """Append ``(row, diff)`` at a fresh timestamp; return it. Caller holds the write lock."""
    for _ in range(_ATTEMPTS):
        ts = rt.oracle.write_ts()
        updates = [(row, ts, diff) for row, diff in changes]
        try:
            await rt.storage.append([(item.id, updates, Antichain.of(ts + 1))])
        except InvalidUppers as e:
            # The table moved (another writer raced us); a later timestamp will fit.
            _forget_uppers(rt, e)
            continue
        rt.table_uppers[item.id] = ts + 1
        rt.oracle.apply_write(ts)
        return ts
    raise UsageError(f"table {item.name}: could not append after {_ATTEMPTS} attempts")


async def insert(rt: Runtime, name: str, rows: Sequence[Sequence[Datum]]) -> int:
    item = table(rt, name)
    valid = _validate(item, rows)
    async with rt.write_lock:
        return await _write(rt, item, [(r, 1) for r in valid])


def _forget_uppers(rt: Runtime, error: InvalidUppers) -> None:
    rt.table_uppers.clear()


async def _contents(rt: Runtime, item: TableItem) -> Counter[Row]:
    """The table's contents now (all acknowledged writes). Caller holds the write lock."""
    upper = rt.table_upper(item.id)
    if upper == 0:
        return Counter()
    rows = await rt.storage.snapshot(item.id, upper - 1)
    return Counter({row: diff for row, diff in rows if diff > 0})


def _matches(row: Row, where: Mapping[str, Datum], positions: Mapping[str, int]) -> bool:
    return all(row[positions[c]] == v for c, v in where.items())


async def delete(
    rt: Runtime,
    name: str,
    rows: Sequence[Sequence[Datum]] | None = None,
    *,
    where: Mapping[str, Datum] | None = None,
) -> tuple[int, int]:
    """Delete exactly ``rows`` (each occurrence once), or every row matching ``where``.

    Returns ``(timestamp, rows deleted)``. Rows not in the table are an error naming them, and
    nothing is deleted.
    """
    item = table(rt, name)
    if where is not None:
        check_argument(where, dict, "where (column: value)")
    if (rows is None) == (where is None):
        raise UsageError("delete takes either rows or where=, not both (and not neither)")
    positions = {c: item.desc.index_of(c) for c in (where or {})}
    wanted = Counter(_validate(item, rows)) if rows is not None else Counter[Row]()
    async with rt.write_lock:
        current = await _contents(rt, item)
        if where is not None:
            wanted = Counter({r: n for r, n in current.items() if _matches(r, where, positions)})
        missing = [r for r, n in wanted.items() if current[r] < n]
        if missing:
            shown = ", ".join(repr(r) for r in missing[:3])
            raise RowsNotFound(f"table {item.name}: {len(missing)} row(s) not found: {shown}")
        if not wanted:
            return rt.oracle.read_ts(), 0
        ts = await _write(rt, item, [(r, -n) for r, n in wanted.items()])
        return ts, sum(wanted.values())


async def update(
    rt: Runtime, name: str, changes: Sequence[tuple[Sequence[Datum], Sequence[Datum]]]
) -> int:
    """Replace each ``old`` row by ``new``, atomically at one timestamp."""
    item = table(rt, name)
    check_argument(changes, (list, tuple), f"the changes to table {name} ((old, new) pairs)")
    for c in changes:
        check_argument(c, (list, tuple), f"a change to table {name} (an (old, new) pair)")
        if len(c) != 2:
            raise InvalidArgument(f"a change to table {name} must be an (old, new) pair: {c!r}")
    olds = _validate(item, [c[0] for c in changes])
    news = _validate(item, [c[1] for c in changes])
    async with rt.write_lock:
        current = await _contents(rt, item)
        need = Counter(olds)
        missing = [r for r, n in need.items() if current[r] < n]
        if missing:
            shown = ", ".join(repr(r) for r in missing[:3])
            raise RowsNotFound(f"table {item.name}: {len(missing)} row(s) not found: {shown}")
        diffs: Counter[Row] = Counter()
        for r in olds:
            diffs[r] -= 1
        for r in news:
            diffs[r] += 1
        return await _write(rt, item, [(r, d) for r, d in diffs.items() if d != 0])


async def advance_tables(rt: Runtime) -> int | None:
    """Move every table's upper, and the read timestamp, to a fresh timestamp; return it
    (``None``: the tables could not be advanced)."""
    tables = [i for i in rt.catalog if isinstance(i, TableItem)]
    if not tables:
        async with rt.write_lock:
            ts = rt.oracle.write_ts()
            rt.oracle.apply_write(ts)
            return ts
    async with rt.write_lock:
        for _ in range(_ATTEMPTS):
            ts = rt.oracle.write_ts()
            try:
                await rt.storage.append([(t.id, [], Antichain.of(ts + 1)) for t in tables])
            except InvalidUppers as e:
                _forget_uppers(rt, e)
                continue
            for t in tables:
                rt.table_uppers[t.id] = ts + 1
            rt.oracle.apply_write(ts)
            return ts
    _log.warning("table tick: could not advance the tables after %d attempts", _ATTEMPTS)
    return None


async def tick_forever(rt: Runtime, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await advance_tables(rt)
        except Exception:
            _log.exception("table tick failed")
