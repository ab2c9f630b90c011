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

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import SchemaMismatch
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId
from spate.persist.state import Appended, UpperMismatch
from spate.persist.write import WriteHandle
from spate.repr.arrow import updates_schema, updates_to_table, validate_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Row
from spate.storage.controller.errors import InvalidUsage, UpdateBeyondUpper, UpdateNotBeyondLower

TableUpdates: TypeAlias = pa.Table | Sequence[tuple[Row, int, int]]
"""Updates for a table: an Arrow table (data columns, ``_time``, ``_diff``) or triples."""


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
    if isinstance(updates, pa.Table):
        for col in (TIME_COLUMN, DIFF_COLUMN):
            if col not in updates.column_names:
                raise SchemaMismatch(name, None, col, "int64", "no such column")
        table = validate_table(desc, updates, collection=name)
    else:
        triples: list[tuple[Row, int, int]] = list(updates)
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
