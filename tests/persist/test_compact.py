"""Merging a run of batches (compaction's ``merge_updates``): the merged updates accumulate to
the inputs' contents at every time from the since on, and a retraction meets the updates it
cancels."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.frontier.antichain import Antichain
from spate.persist import compact
from spate.persist.compact import merge_updates
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

SCHEMA = pa.schema(
    [
        pa.field("k", pa.int64()),
        pa.field("s", pa.string()),
        pa.field("f", pa.float64()),
        pa.field(TIME_COLUMN, pa.int64(), nullable=False),
        pa.field(DIFF_COLUMN, pa.int64(), nullable=False),
    ]
)

Update = tuple[tuple[Any, ...], int, int]


@pytest.fixture(autouse=True, params=[0, 10**9], ids=["split", "whole"])
def split_min_rows(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of any size group only what a retraction may cancel, or every update."""
    monkeypatch.setattr(compact, "_SPLIT_MIN_ROWS", request.param)


rows = st.tuples(
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.sampled_from(["a", "b"])),
    st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, float("nan")])),
)
updates = st.lists(st.tuples(rows, st.integers(0, 6), st.sampled_from([-2, -1, 1, 2])))


def table(us: list[Update]) -> pa.Table:
    cols = list(zip(*[(*r, t, d) for r, t, d in us], strict=True)) or [[]] * 5
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(cols, SCHEMA, strict=True)], schema=SCHEMA
    )


def key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        "nan" if isinstance(v, float) and v != v else (v + 0.0 if isinstance(v, float) else v)
        for v in row
    )


def contents(t: pa.Table, at: int) -> Counter[tuple[Any, ...]]:
    acc: Counter[tuple[Any, ...]] = Counter()
    for r in t.to_pylist():
        if r[TIME_COLUMN] <= at:
            acc[key((r["k"], r["s"], r["f"]))] += r[DIFF_COLUMN]
    return Counter({k: v for k, v in acc.items() if v})


@settings(max_examples=300, deadline=None)
@given(st.lists(updates, min_size=1, max_size=4), st.integers(0, 7))
def test_merged_updates_accumulate_to_the_same_contents_from_the_since(
    runs: list[list[Update]], since: int
) -> None:
    inputs = [table(us) for us in runs]
    merged = merge_updates(inputs, Antichain.of(since), SCHEMA)
    assert merged.schema == SCHEMA
    whole = pa.concat_tables(inputs)
    for at in range(since, 9):
        assert contents(merged, at) == contents(whole, at)
    # Every time is advanced to the since, and a retraction was added up with every update
    # of its row at its time: a row that has one has no other update at that time.
    assert all(r[TIME_COLUMN] >= since for r in merged.to_pylist())
    seen = Counter((key((r["k"], r["s"], r["f"])), r[TIME_COLUMN]) for r in merged.to_pylist())
    for r in merged.to_pylist():
        if r[DIFF_COLUMN] < 0:
            assert seen[key((r["k"], r["s"], r["f"])), r[TIME_COLUMN]] == 1


def test_a_retraction_of_a_row_in_the_run_cancels_it_and_other_rows_stay() -> None:
    inserts = table([((i, "x", 1.0), 1, 1) for i in range(100)])
    step = table([((5, "x", 1.0), 2, -1), ((5, "y", 1.0), 2, 1), ((500, "z", 2.0), 2, -1)])
    merged = merge_updates([inserts, step], Antichain.of(3), SCHEMA)
    got = Counter({(r["k"], r["s"], r["f"]): r[DIFF_COLUMN] for r in merged.to_pylist()})
    want = Counter({(i, "x", 1.0): 1 for i in range(100) if i != 5})
    want.update({(5, "y", 1.0): 1, (500, "z", 2.0): -1})
    assert got == want and merged.num_rows == 101
