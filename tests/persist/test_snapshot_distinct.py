"""A snapshot of updates whose rows are all distinct (told by the first column) skips the
group-by; it is the same collection as the consolidated one, whatever the input."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from spate.persist import read
from spate.repr import FLOAT64, INT64, TEXT, RelationDesc
from spate.repr.arrow import table_to_updates, updates_schema, updates_to_table
from spate.repr.consolidate import accumulate_at
from spate.repr.types import Row

DESC = RelationDesc.of(("k", INT64, True), ("v", TEXT, True))


def collection(table: pa.Table) -> Counter[Row]:
    return Counter({row: d for row, _t, d in table_to_updates(table)})


def expected(tables: list[pa.Table], as_of: int) -> Counter[Row]:
    acc = accumulate_at(pa.concat_tables(tables), as_of)
    keys = [n for n in acc.column_names if n != "_diff"]
    rows = zip(*(acc.column(n).to_pylist() for n in keys), strict=True)
    return Counter(dict(zip(rows, acc.column("_diff").to_pylist(), strict=True)))


@pytest.mark.parametrize("desc", [DESC, RelationDesc.of(("v", TEXT, True), ("k", INT64, True))])
def test_the_snapshot_equals_the_consolidated_collection(desc: RelationDesc) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    schema = updates_schema(desc)
    for _ in range(200):
        n = rng.randrange(0, 12)
        distinct = rng.random() < 0.5
        ks = rng.sample(range(100), n) if distinct else [rng.randrange(5) for _ in range(n)]
        rows: list[tuple[Row, int, int]] = []
        for k in ks:
            key: Any = None if rng.random() < 0.1 else k
            row: Row = (key, rng.choice(["a", "b", None]))
            if desc.columns[0].name == "v":
                row = (row[1] if row[1] is None else f"{row[1]}{k}", key)
            rows.append((row, rng.randrange(0, 6), rng.choice([-1, 1, 2])))
        tables = [updates_to_table(desc, rows[: n // 2]), updates_to_table(desc, rows[n // 2 :])]
        as_of = rng.randrange(0, 6)
        got = read.snapshot_of(tables, as_of, schema)
        assert got.schema == schema
        assert set(got.column("_time").to_pylist()) <= {as_of}
        assert collection(got) == expected(tables, as_of), seed


def test_distinct_rows_skip_the_group_by(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_args: object, **_kwargs: object) -> pa.Table:
        raise AssertionError("consolidated")

    monkeypatch.setattr(read, "accumulate_at", refused)
    keys = list(range(1_000))
    random.Random(1).shuffle(keys)  # ascending or not
    rows = [((k, f"v{k}"), k % 3, 1 + k % 2) for k in keys]
    for ordered in (sorted(rows), rows):
        got = read.snapshot_of([updates_to_table(DESC, ordered)], 1, updates_schema(DESC))
        assert collection(got) == Counter(
            {(k, f"v{k}"): 1 + k % 2 for k in range(1_000) if k % 3 <= 1}
        )
    # A float or text first column, a NULL key or a repeated key is consolidated.
    floats = RelationDesc.of(("x", FLOAT64, False))
    with pytest.raises(AssertionError, match="consolidated"):
        read.snapshot_of([updates_to_table(floats, [((1.0,), 0, 1)])], 0, updates_schema(floats))
    texts = RelationDesc.of(("v", TEXT, False))
    with pytest.raises(AssertionError, match="consolidated"):
        read.snapshot_of([updates_to_table(texts, [(("a",), 0, 1)])], 0, updates_schema(texts))
    with pytest.raises(AssertionError, match="consolidated"):
        read.snapshot_of(
            [updates_to_table(DESC, [((None, "a"), 0, 1), ((2, "a"), 0, 1)])],
            1,
            updates_schema(DESC),
        )
    with pytest.raises(AssertionError, match="consolidated"):
        read.snapshot_of(
            [updates_to_table(DESC, [((1, "a"), 0, 1), ((1, "a"), 1, -1)])],
            1,
            updates_schema(DESC),
        )
