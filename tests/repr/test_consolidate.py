"""Consolidation properties and the compaction guarantee."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from spate.repr.arrow import table_to_rows, table_to_updates, updates_to_table
from spate.repr.consolidate import accumulate_at, advance_times, consolidate, consolidate_updates
from spate.testing.strategies import KV_DESC, kv_updates


def _model(updates) -> Counter:
    acc: Counter = Counter()
    for row, t, d in updates:
        acc[(row, t)] += d
    return Counter({k: v for k, v in acc.items() if v != 0})


def _as_counter(table: pa.Table) -> Counter:
    return Counter({(row, t): d for row, t, d in table_to_updates(table)})


@given(kv_updates(), st.randoms())
def test_consolidate_sums_drops_zeros_is_idempotent_and_order_free(updates, rnd) -> None:
    table = updates_to_table(KV_DESC, updates)
    once = consolidate(table)
    assert _as_counter(once) == _model(updates)
    assert all(d != 0 for _, _, d in table_to_updates(once))
    assert once.num_rows == len(_model(updates))  # each (row, time) once
    assert _as_counter(consolidate(once)) == _as_counter(once)
    shuffled = list(updates)
    rnd.shuffle(shuffled)
    assert _as_counter(consolidate(updates_to_table(KV_DESC, shuffled))) == _as_counter(once)
    assert once.schema == table.schema


@given(kv_updates())
def test_sorted_output_is_sorted(updates) -> None:
    out = table_to_updates(consolidate(updates_to_table(KV_DESC, updates), sort=True))
    # NULLs sort last, as in Arrow and PostgreSQL's default ascending order.
    keys = [(r[0], r[1] is None, r[1] or "", t) for r, t, _ in out]
    assert keys == sorted(keys)


@given(kv_updates(), st.integers(0, 7))
def test_accumulate_at(updates, time: int) -> None:
    acc: Counter = Counter()
    for row, t, d in updates:
        if t <= time:
            acc[row] += d
    expected = {r: d for r, d in acc.items() if d != 0}
    out = accumulate_at(updates_to_table(KV_DESC, updates), time)
    assert out.column_names == ["k", "v", "_diff"]
    got = dict(zip(table_to_rows(out), out.column("_diff").to_pylist(), strict=True))
    assert got == expected


@given(kv_updates(), st.integers(0, 7), st.integers(0, 7))
def test_advancing_times_to_since_preserves_reads_at_or_beyond_it(
    updates, since: int, time: int
) -> None:
    """The differential dataflow guarantee that compaction relies on, checked literally."""
    table = updates_to_table(KV_DESC, updates)
    compacted = consolidate(advance_times(table, since))
    read_at = max(time, since)
    before = accumulate_at(table, read_at, sort=True)
    after = accumulate_at(compacted, read_at, sort=True)
    assert before.equals(after)
    assert all(t >= since for _, t, _ in table_to_updates(compacted))


@given(kv_updates())
def test_consolidate_updates_matches_arrow(updates) -> None:
    assert Counter({(r, t): d for r, t, d in consolidate_updates(updates)}) == _model(updates)


def test_empty_and_keyless_tables() -> None:
    empty = updates_to_table(KV_DESC, [])
    assert consolidate(empty).num_rows == 0
    assert accumulate_at(empty, 5).column_names == ["k", "v", "_diff"]
    keyless = pa.table({"_time": [1, 2, 3], "_diff": [2, -1, 4]})
    assert accumulate_at(keyless, 2).column("_diff").to_pylist() == [1]
    assert accumulate_at(pa.table({"_time": [1], "_diff": [0]}), 2).num_rows == 0


@given(st.data())
def test_consolidating_by_sorting_equals_the_hash_group_by(data) -> None:
    """Small tables of integer-like and text columns (NULLs among them) are consolidated by
    sorting: the same updates as the hash group-by, which floats still take; sorted, in the
    same order as sort_by's."""
    import datetime as dt

    from spate.repr import consolidate as module

    n = data.draw(st.integers(1, 40))

    def column(values: st.SearchStrategy, typ: pa.DataType) -> pa.Array:
        return pa.array(data.draw(st.lists(st.none() | values, min_size=n, max_size=n)), typ)

    table = pa.table(
        {
            "i": column(st.integers(-3, 3), pa.int64()),
            "s": column(st.sampled_from(["", "a", "b"]), pa.string()),
            "b": column(st.booleans(), pa.bool_()),
            "d": column(st.dates(dt.date(2024, 1, 1), dt.date(2024, 1, 3)), pa.date32()),
            "f": column(st.sampled_from([0.0, -0.0, 1.5]), pa.float64()),
            "_time": pa.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))),
            "_diff": pa.array(data.draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n))),
        }
    )
    for names in (["i", "s", "b", "d"], ["i", "s", "b", "d", "f"], ["s"]):
        sub = table.select([*names, "_time", "_diff"])
        keys = [*names, "_time"]
        expected = module._group_sum(sub, keys)
        got = consolidate(sub)
        assert got.schema == sub.schema
        assert Counter(map(tuple, (r.values() for r in got.to_pylist()))) == Counter(
            map(tuple, (r.values() for r in expected.select(sub.column_names).to_pylist()))
        )
        if "f" not in names:
            assert module._sorted_sums(sub, keys) is not None
        # sorted: by the data columns, then time, NULLs last, as sort_by orders them
        by = [(k, "ascending") for k in keys]
        want = expected.select(sub.column_names).sort_by(by).to_pylist()
        assert consolidate(sub, sort=True).to_pylist() == want
