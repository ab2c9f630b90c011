"""Table writes: validation of one table's updates, and its compare-and-append.

``prepare_append`` checks that every row fits the table's schema (arity, types, NULLs) and that
every time lies in ``[upper, new_upper)``, and raises before anything is written; the result is
an Arrow table in the shard's schema. ``write_append`` is the compare-and-append of one
prepared write from the upper the controller knows (tables have one writer: the controller).
How a call for several tables is made atomic is in :mod:`.table_writes` and :mod:`.table_txn`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import SchemaMismatch
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId
from spate.persist.state import Appended, UpperMismatch
from spate.persist.write import WriteHandle
from spate.repr.arrow import updates_schema, updates_to_table, validate_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind
from spate.storage.controller.errors import InvalidUsage, UpdateBeyondUpper, UpdateNotBeyondLower


@dataclass(frozen=True, slots=True)
class ValidatedChanges:
    """Changes to one table, validated once (:func:`validate_changes`): an Arrow table in the
    table's updates schema whose ``_time`` is not yet chosen. ``at(time)`` fixes it."""

    table: pa.Table

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def at(self, time: int) -> ValidatedUpdates:
        """The updates at ``time``."""
        i = self.table.schema.get_field_index(TIME_COLUMN)
        column = pa.array(np.full(self.table.num_rows, time, dtype=np.int64))
        return ValidatedUpdates(self.table.set_column(i, self.table.schema.field(i), column))


@dataclass(frozen=True, slots=True)
class ValidatedUpdates:
    """Updates already validated against the table (in its updates schema): an append takes
    them as they are."""

    table: pa.Table


def validate_changes(
    desc: RelationDesc, changes: Sequence[tuple[Sequence[Datum], int]], *, collection: str
) -> ValidatedChanges:
    """Validate ``(row, diff)`` changes against ``desc`` once, into Arrow; raise
    ``SchemaMismatch`` (naming the row) before anything is written."""
    rows = desc.validate_rows((c[0] for c in changes), collection=collection)
    for i, (_row, diff) in enumerate(changes):
        if isinstance(diff, bool) or not isinstance(diff, int):
            raise SchemaMismatch(collection, i, None, "an int diff", repr(diff)[:60])
    return trusted_changes(desc, [(row, c[1]) for row, c in zip(rows, changes, strict=True)])


def trusted_changes(desc: RelationDesc, changes: Sequence[tuple[Row, int]]) -> ValidatedChanges:
    """Changes whose rows are known to fit ``desc`` (read from the table, or validated)."""
    table = _int64_changes(desc, changes)
    if table is None:
        table = updates_to_table(desc, [(row, 0, diff) for row, diff in changes])
    return ValidatedChanges(table.cast(updates_schema(desc)))


def _int64_changes(desc: RelationDesc, changes: Sequence[tuple[Row, int]]) -> pa.Table | None:
    """The changes of a table of int64 columns as one numpy matrix made columns (what
    :func:`updates_to_table` makes one Python value at a time); ``None`` for another table,
    or rows with a NULL."""
    width = len(desc.columns)
    if not changes or not width or any(c.type.kind is not ScalarKind.INT64 for c in desc.columns):
        return None
    try:
        matrix = np.array([row for row, _diff in changes], dtype=np.int64)
    except (TypeError, ValueError):  # a NULL (None)
        return None
    if matrix.shape != (len(changes), width):
        return None
    n = len(changes)
    columns = [pa.array(np.ascontiguousarray(matrix[:, i])) for i in range(width)]
    columns.append(pa.array(np.zeros(n, dtype=np.int64)))
    columns.append(pa.array(np.fromiter((d for _row, d in changes), np.int64, count=n)))
    return pa.Table.from_arrays(columns, schema=updates_schema(desc))


TableUpdates: TypeAlias = ValidatedUpdates | pa.Table | Sequence[tuple[Row, int, int]]
"""Updates for a table: an Arrow table (data columns, ``_time``, ``_diff``) or triples, each
validated by the append, or :class:`ValidatedUpdates`, which are not validated again."""


@dataclass(frozen=True, slots=True)
class PreparedAppend:
    id: GlobalId
    table: pa.Table | None
    expected_upper: Frontier
    new_upper: Frontier


def prepare_append(
    id: GlobalId,
    desc: RelationDesc,
    updates: TableUpdates,
    *,
    upper: Frontier,
    new_upper: Frontier,
) -> PreparedAppend:
    """Validate one table's updates (see the module docs); raise before any write."""
    if not isinstance(new_upper, type(upper)) or len(new_upper) > 1:
        raise InvalidUsage(f"append to {id}: new upper {new_upper!r} is not a frontier")
    if not upper.less_equal(new_upper):
        raise InvalidUsage(f"append to {id}: new upper {new_upper} is before its upper {upper}")
    name = f"table {id}"
    if isinstance(updates, ValidatedUpdates):
        table = updates.table
        if not table.schema.equals(updates_schema(desc)):
            raise InvalidUsage(f"append to {id}: validated updates of another schema")
    elif isinstance(updates, pa.Table):
        for col in (TIME_COLUMN, DIFF_COLUMN):
            if col not in updates.column_names:
                raise SchemaMismatch(name, None, col, "int64", "no such column")
        table = validate_table(desc, updates, collection=name)
    else:
        triples: list[tuple[Row, int, int]] = list(updates)
        if not triples:  # an advance (every table moves with each group commit)
            return PreparedAppend(id, None, upper, new_upper)
        for i, u in enumerate(triples):
            if not isinstance(u, tuple) or len(u) != 3:
                raise SchemaMismatch(name, i, None, "an update (row, time, diff)", repr(u)[:60])
            _row, time, diff = u
            for what, v in (("time", time), ("diff", diff)):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise SchemaMismatch(name, i, None, f"an int {what}", repr(v)[:60])
        rows = desc.validate_rows((u[0] for u in triples), collection=name)
        table = updates_to_table(
            desc, [(row, u[1], u[2]) for row, u in zip(rows, triples, strict=True)]
        )
    if table.num_rows == 0:
        return PreparedAppend(id, None, upper, new_upper)
    bounds = pc.min_max(table.column(TIME_COLUMN))
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if new_upper.less_equal(hi):
        raise UpdateBeyondUpper(id, hi, new_upper)
    if not upper.less_equal(lo):
        raise UpdateNotBeyondLower(id, lo, upper)
    return PreparedAppend(id, table.cast(updates_schema(desc)), upper, new_upper)


def write_append(
    writer: WriteHandle, prepared: PreparedAppend, token: uuid.UUID
) -> Appended | UpperMismatch:
    """The compare-and-append of one prepared table write (blocking)."""
    return writer.compare_and_append(
        prepared.table,
        expected_upper=prepared.expected_upper,
        new_upper=prepared.new_upper,
        idempotency_token=token,
    )
