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
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Final, TypeAlias, TypeGuard, TypeVar, cast

import numpy as np
import pyarrow as pa

from spate.environment.catalog import TableItem, kind_of
from spate.environment.runtime import Runtime
from spate.errors import (
    CheckViolation,
    InvalidArgument,
    NotNullViolation,
    SchemaMismatch,
    UsageError,
    check_argument,
)
from spate.errors import RowsNotFound as RowsNotFound
from spate.plan.evaluation.scalar import compile_scalar
from spate.plan.evaluation.values import canonical_row
from spate.repr.arrow import table_to_rows, updates_schema, validate_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind
from spate.storage.controller.errors import InvalidUppers
from spate.storage.controller.group_commit import TableContents
from spate.storage.controller.table_keys import UniqueKey
from spate.storage.controller.tables import ValidatedChanges, trusted_changes

if TYPE_CHECKING:
    import pandas as pd

_log: Final = logging.getLogger("spate.environment")
T = TypeVar("T")


def table(rt: Runtime, name: str) -> TableItem:
    item = rt.catalog.get(name)
    if not isinstance(item, TableItem):
        raise UsageError(f"{name} is a {kind_of(item)}, not a table: only tables take writes")
    return item


def _collection(item: TableItem) -> str:
    return f"{item.name} ({item.id})"


def _validate(item: TableItem, rows: Sequence[Sequence[Datum]]) -> list[Row]:
    fast = _int64_rows(item.desc, rows)
    if fast is not None:
        return fast
    try:
        return item.desc.validate_rows(rows, collection=_collection(item))
    except SchemaMismatch as e:
        raise _not_null(item, e, lambda i: rows[i]) from None


def _not_null(
    item: TableItem, e: SchemaMismatch, row_at: Callable[[int], Sequence[Datum]]
) -> SchemaMismatch:
    """``e`` as PostgreSQL's not-null violation (23502) if it is a NULL in a non-null
    column, else ``e``."""
    if e.got != "NULL" or e.column is None or e.row_index is None:
        return e
    try:
        shown = _row_text(row_at(e.row_index))
    except (IndexError, TypeError):
        shown = None
    return NotNullViolation(item.name, e.collection, e.row_index, e.column, shown)


def _row_text(row: Sequence[Datum]) -> str:
    """A row as PostgreSQL's ``Failing row contains (…)`` shows it."""
    return ", ".join(_datum_text(v) for v in row)


def _datum_text(v: Datum) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "t" if v else "f"
    return str(v)


def _keys(item: TableItem) -> tuple[UniqueKey, ...]:
    return tuple(UniqueKey(c.name, c.columns) for c in item.unique)


def _check(item: TableItem, rows: Iterable[Row]) -> None:
    """Raise :class:`CheckViolation` for the first row for which a CHECK constraint of the
    table is false (NULL passes, as in PostgreSQL)."""
    checks = item.checks
    if not checks:
        return
    columns = list(item.desc.columns)
    compiled = [(c, compile_scalar(c.expr, columns)) for c in checks]
    now = int(time.time() * 1000)
    for row in rows:
        canonical = canonical_row(row, columns)
        for c, f in compiled:
            if f(canonical, now) is False:
                raise CheckViolation(
                    f'new row for relation "{item.name}" violates check constraint "{c.name}"',
                    constraint=c.name,
                    detail=f"Failing row contains ({_row_text(row)}).",
                )


def _int64_rows(desc: RelationDesc, rows: Sequence[Sequence[Datum]]) -> list[Row] | None:
    """``rows`` as :meth:`RelationDesc.validate_rows` returns them if they plainly fit a table
    of int64 columns — a list of tuples of the table's arity of plain ``int`` values in range
    — checked with a few passes in C rather than a Python call per value; ``None`` when the
    table has another column or any row is not that (then the full check runs: it accepts
    every row this does, and names the first bad one)."""
    n = len(desc.columns)
    if not rows or any(c.type.kind is not ScalarKind.INT64 for c in desc.columns):
        return None
    if not isinstance(rows, list) or set(map(type, rows)) != {tuple}:
        return None
    if set(map(len, rows)) != {n}:
        return None
    values = list(chain.from_iterable(rows))
    if set(map(type, values)) != {int}:
        return None
    try:  # in range: numpy refuses an int beyond int64 (one pass in C, not min and max)
        np.fromiter(values, np.int64, count=len(values))
    except OverflowError:
        return None
    return cast("list[Row]", rows)


Insertable: TypeAlias = "Sequence[Sequence[Datum]] | pa.Table | pd.DataFrame"
"""Rows to insert: Python rows, an Arrow table or a pandas DataFrame."""


def is_columnar(rows: object) -> TypeGuard[pa.Table | pd.DataFrame]:
    """``rows`` is an Arrow table or a pandas DataFrame (pandas is not imported for this)."""
    # pandas may be half imported by another thread: then no DataFrame exists yet.
    frame = getattr(sys.modules.get("pandas"), "DataFrame", None)
    return isinstance(rows, pa.Table) or (frame is not None and isinstance(rows, frame))


def _arrow_changes(item: TableItem, data: pa.Table | pd.DataFrame) -> ValidatedChanges:
    """Columnar rows checked against the table (vectorised, no Python row objects): the same
    column names (in any order), types that cast safely, no NULL in a non-null column (the
    error names the column and the first such row), floats canonical (``-0.0`` is ``0.0``,
    one NaN). In a DataFrame a float NaN is the value NaN; NULL is ``None`` or ``pd.NA``."""
    if not isinstance(data, pa.Table):
        data = _from_pandas(item, data)
    names = _names(item)
    if sorted(data.column_names) == sorted(names):
        data = data.select(names)
    try:
        valid = validate_table(item.desc, data, collection=_collection(item))
    except SchemaMismatch as e:
        raise _not_null(item, e, lambda i: table_to_rows(data.slice(i, 1))[0]) from None
    n = valid.num_rows
    valid = valid.append_column(TIME_COLUMN, pa.array(np.zeros(n, dtype=np.int64)))
    valid = valid.append_column(DIFF_COLUMN, pa.array(np.ones(n, dtype=np.int64)))
    return ValidatedChanges(valid.cast(updates_schema(item.desc)))


def _from_pandas(item: TableItem, df: pd.DataFrame) -> pa.Table:
    """``df`` as Arrow, keeping a float NaN a value (``Table.from_pandas`` makes it NULL)."""
    arrays: list[pa.Array] = []
    for c in df.columns:
        if not isinstance(c, str):
            raise InvalidArgument(f"a DataFrame to insert into {item.name}: column name {c!r}")
        series = df[c]
        try:
            if isinstance(series.dtype, np.dtype) and series.dtype.kind == "f":
                arrays.append(pa.array(series.to_numpy(), from_pandas=False))
            else:
                arrays.append(pa.array(series, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            column = item.desc.columns[item.desc.index_of(c)] if c in _names(item) else None
            expected = str(column.type) if column is not None else "a column of the table"
            raise SchemaMismatch(_collection(item), None, c, expected, str(e)[:120]) from None
    return pa.Table.from_arrays(arrays, names=list(df.columns))


def as_list(values: Iterable[T], what: str) -> list[T]:
    """``values`` as a list; a string or a non-iterable is refused (``InvalidArgument``)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgument(
            f"{what} must be a list of rows, got {type(values).__name__} {values!r:.60}"
        )
    return list(values)


def insertable(name: str, rows: object) -> tuple[Insertable, int]:
    """The rows of an insert into ``name`` as :func:`insert` takes them (columnar data as it
    is, rows as a list, anything else refused) and how many there are."""
    if is_columnar(rows):
        return rows, len(rows)
    listed = as_list(cast("Iterable[Sequence[Datum]]", rows), f"the rows to insert into {name}")
    return listed, len(listed)


def _names(item: TableItem) -> list[str]:
    return [c.name for c in item.desc.columns]


async def insert(rt: Runtime, name: str, rows: Insertable) -> int:
    """Append ``rows``; return the timestamp of the write once it is acknowledged."""
    item = table(rt, name)
    keys = _keys(item)
    if is_columnar(rows):
        changes = _arrow_changes(item, rows)
        if item.checks:
            _check(item, table_to_rows(changes.table, [c.name for c in item.desc.columns]))
        return await rt.commits.write(item.id, changes, keys=keys)
    valid = _validate(item, cast("Sequence[Sequence[Datum]]", rows))
    _check(item, valid)
    changes = trusted_changes(item.desc, [(r, 1) for r in valid])
    return await rt.commits.write(item.id, changes, keys=keys)


def _missing(item: TableItem, contents: TableContents, wanted: Counter[Row]) -> None:
    rows = list(wanted)
    counts = contents.counts(rows)
    missing = [r for r, n in zip(rows, counts, strict=True) if n < wanted[r]]
    if missing:
        shown = ", ".join(repr(r) for r in missing[:3])
        raise RowsNotFound(f"table {item.name}: {len(missing)} row(s) not found: {shown}")


def _matches(row: Row, where: Mapping[str, Datum], positions: Mapping[str, int]) -> bool:
    # Values are canonical on both sides: NaN is one object (equal to itself, as in
    # PostgreSQL), -0.0 is 0.0.
    return all((w := row[positions[c]]) is v or w == v for c, v in where.items())


def _checked_where(item: TableItem, where: object) -> dict[str, Datum]:
    """``where`` as ``{column: value}``, each value checked against its column's type and
    made canonical, so that a value of another type is refused rather than matching nothing."""
    check_argument(where, dict, "where (column: value)")
    assert isinstance(where, dict)
    for c in where:
        check_argument(c, str, f"a where column of table {item.name}")
    names = list(where)
    sub = RelationDesc(item.desc.column(c) for c in names)
    (values,) = sub.validate_rows(
        [tuple(where.values())], collection=f"the where= values for table {_collection(item)}"
    )
    return dict(zip(names, values, strict=True))


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
        where = _checked_where(item, where)
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

    counted = list(given) if given is not None else None
    ts = await rt.commits.write_derived(item.id, derive, rows=counted)
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
    _check(item, news)
    diffs: Counter[Row] = Counter()
    for r in olds:
        diffs[r] -= 1
    for r in news:
        diffs[r] += 1

    def derive(contents: TableContents) -> list[tuple[Row, int]]:
        _missing(item, contents, Counter(olds))
        return [(r, d) for r, d in diffs.items() if d != 0]

    return await rt.commits.write_derived(item.id, derive, rows=olds, keys=_keys(item))


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
