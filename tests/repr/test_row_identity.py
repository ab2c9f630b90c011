"""One identity per row: ``-0.0`` is ``0.0``, and NaN equals NaN (as in PostgreSQL), in every
place rows meet: validation, the Arrow format, consolidation and reading rows back."""

from __future__ import annotations

import math
from collections import Counter

from spate.repr import FLOAT64, INT64, RelationDesc
from spate.repr.arrow import table_to_rows, table_to_updates, updates_to_table, validate_table
from spate.repr.consolidate import accumulate_at, consolidate

DESC = RelationDesc.of(("k", INT64, False), ("x", FLOAT64))


def test_negative_zero_and_zero_are_one_row_when_consolidated() -> None:
    table = updates_to_table(DESC, [((1, 0.0), 0, 1), ((1, -0.0), 0, -1)])
    assert consolidate(table).num_rows == 0
    assert accumulate_at(table, 0).num_rows == 0


def test_nan_equals_nan_when_consolidated_and_read_back() -> None:
    nan_a = float("nan")
    nan_b = -float("nan")  # another NaN object (and sign bit)
    table = updates_to_table(DESC, [((1, nan_a), 0, 1), ((1, nan_b), 0, 1)])
    out = consolidate(table)
    assert table_to_updates(out)[0][2] == 2
    rows = table_to_rows(table)
    # Rows read back count as one row (NaN is equal to itself), as PostgreSQL treats them.
    assert Counter(rows) == Counter({rows[0]: 2})
    assert math.isnan(rows[0][1])


def test_validated_rows_have_one_identity() -> None:
    rows = DESC.validate_rows([(1, -0.0), (1, float("nan")), (2, 3)], collection="t")
    assert math.copysign(1.0, rows[0][1]) == 1.0
    assert rows[1] == DESC.validate_rows([(1, float("nan"))], collection="t")[0]
    assert rows[2] == (2, 3.0) and isinstance(rows[2][1], float)


def test_validated_arrow_tables_have_one_identity() -> None:
    import pyarrow as pa

    raw = pa.table({"k": pa.array([1, 1], pa.int64()), "x": pa.array([-0.0, 0.0])})
    out = validate_table(DESC, raw, collection="t")
    assert [math.copysign(1.0, v) for v in out.column("x").to_pylist()] == [1.0, 1.0]
