"""Table writes and the table tick, through the storage controller's group commit.

Every table write is validated once (into Arrow) and handed to the group committer
(:mod:`spate.storage.controller.group_commit`): every write pending when a commit starts goes in
it, at one fresh timestamp from the oracle, as one compare-and-append per table; the oracle is
told the timestamp is acknowledged before any write of the group returns — so a read at
``oracle.read_ts()`` observes it. A delete or update checks its rows against the table's
current contents inside the commit, after every earlier write and before any later one, and
retracts from them; the committer reads a table's contents once and keeps them up to date with
its own commits, so a delete or update does not read the table again. A row the table does not
hold fails the write, and nothing is written.

The tick advances every table's upper to a fresh timestamp about once a second (an empty
append, part of the next group), so that reads at the current read timestamp and views over
idle tables keep moving. With no tables it still advances the read timestamp to the wall
clock, as an acknowledged empty write would: a read of source-fed data then observes the
present, waiting for the sources' uppers to pass it, rather than the oldest time still
readable.
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
from spate.repr.types import Datum, Row
from spate.storage.controller.errors import InvalidUppers
from spate.storage.controller.group_commit import TableContents
from spate.storage.controller.tables import trusted_changes

_log: Final = logging.getLogger("spate.environment")


def table(rt: Runtime, name: str) -> TableItem:
    item = rt.catalog.get(name)
    if not isinstance(item, TableItem):
        raise UsageError(f"{name} is a {kind_of(item)}, not a table: only tables take writes")
    return item


def _collection(item: TableItem) -> str:
    return f"{item.name} ({item.id})"


def _validate(item: TableItem, rows: Sequence[Sequence[Datum]]) -> list[Row]:
    return item.desc.validate_rows(rows, collection=_collection(item))


async def insert(rt: Runtime, name: str, rows: Sequence[Sequence[Datum]]) -> int:
    """Append ``rows``; return the timestamp of the write once it is acknowledged."""
    item = table(rt, name)
    valid = _validate(item, rows)
    return await rt.commits.write(item.id, trusted_changes(item.desc, [(r, 1) for r in valid]))


def _missing(item: TableItem, contents: TableContents, wanted: Counter[Row]) -> None:
    missing = [r for r, n in wanted.items() if contents.count(r) < n]
    if missing:
        shown = ", ".join(repr(r) for r in missing[:3])
        raise RowsNotFound(f"table {item.name}: {len(missing)} row(s) not found: {shown}")


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
    given = Counter(_validate(item, rows)) if rows is not None else None
    deleted = 0

    def derive(contents: TableContents) -> list[tuple[Row, int]]:
        nonlocal deleted
        if given is not None:
            wanted = given
        else:
            assert where is not None
            wanted = Counter({r: n for r, n in contents.items() if _matches(r, where, positions)})
        _missing(item, contents, wanted)
        deleted = sum(wanted.values())
        return [(r, -n) for r, n in wanted.items()]

    ts = await rt.commits.write_derived(item.id, derive)
    return ts, deleted


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
    diffs: Counter[Row] = Counter()
    for r in olds:
        diffs[r] -= 1
    for r in news:
        diffs[r] += 1

    def derive(contents: TableContents) -> list[tuple[Row, int]]:
        _missing(item, contents, Counter(olds))
        return [(r, d) for r, d in diffs.items() if d != 0]

    return await rt.commits.write_derived(item.id, derive)


async def advance_tables(rt: Runtime) -> int | None:
    """Move every table's upper, and the read timestamp, to a fresh timestamp; return it
    (``None``: the tables could not be advanced)."""
    try:
        return await rt.commits.advance()
    except InvalidUppers as e:  # another writer moved a table's shard
        _log.warning("table tick: could not advance the tables: %s", e)
        return None


async def tick_forever(rt: Runtime, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await advance_tables(rt)
        except Exception:
            _log.exception("table tick failed")
