"""The numpy fold (spate.render.operators.int_fold) against the pyarrow fold it stands in for
(accumulators.fold): on seeded random histories and deltas (several times per step, inserts and
retractions, a group's extreme retracted, groups emptied), both give the same output changes,
the same accumulators, the same slow keys and count of folded keys, or both decline.

Replay a failure with ``SPATE_TEST_SEED=<seed printed> pytest tests/render/test_int_fold.py``.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pytest

from spate.ids import GlobalId
from spate.plan.aggregate import AggregateExpr
from spate.plan.builder import avg, col, count, max_, min_, sum_
from spate.plan.relation import Get
from spate.render.layout import internal_schema
from spate.render.operators import int_fold
from spate.render.operators.accumulators import Layout, Unfoldable, fold, state_of
from spate.render.operators.driver_reduce import reduce_on_driver
from spate.render.operators.int_fold import applies, fold_ints, reduce_ints
from spate.render.operators.key_times import key_times, with_from
from spate.repr import INT64, TIMESTAMP, RelationDesc
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

SEED = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))
FACTS = RelationDesc.of(("k", INT64, False), ("v", INT64, False), ("w", INT64, False))
BY_TIME = RelationDesc.of(("at", TIMESTAMP, False), ("v", INT64, False), ("w", INT64, False))

LAYOUTS: dict[str, dict[str, AggregateExpr]] = {
    "max": {"hi": max_(col("v"))},
    "min": {"lo": min_(col("v"))},
    "mixed": {"n": count(), "nv": count(col("v")), "total": sum_(col("w")), "hi": max_(col("v"))},
    "both": {"lo": min_(col("v")), "hi": max_(col("w")), "n": count()},
}


def _layout(desc: RelationDesc, aggs: dict[str, AggregateExpr]) -> Layout:
    plan = Get(GlobalId.user(1), desc).reduce([desc.columns[0].name], **aggs)
    (key,) = plan.group_key
    return Layout((key,), tuple(plan.aggregates), desc, plan.desc)


def _updates(desc: RelationDesc, rows: list[tuple[int, int, int, int, int]]) -> pa.Table:
    schema = internal_schema(desc)
    cols: list[tuple[int, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 5
    arrays = [
        pa.array(np.asarray(c, np.int64)).cast(f.type) for c, f in zip(cols, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _sorted(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def _case(rng: random.Random, desc: RelationDesc) -> tuple[pa.Table, pa.Table, int]:
    """A history at time 0 and a delta of the same keys at times ``>= lo``."""
    keys = rng.sample(range(-5, 40), rng.randint(1, 12))
    history = [
        (k, rng.randint(-9, 9), rng.randint(-3, 3), 0, 1)
        for k in keys
        for _ in range(rng.randint(1, 5))
    ]
    lo = 10
    delta = []
    for _ in range(rng.randint(1, 30)):
        t = lo + rng.randint(0, 3)
        if history and rng.random() < 0.4:  # retract a row of the history (maybe an extreme)
            k, v, w, _, _ = history[rng.randrange(len(history))]
            delta.append((k, v, w, t, -1))
        else:
            delta.append((rng.choice(keys), rng.randint(-12, 12), rng.randint(-3, 3), t, 1))
    return _updates(desc, history), _updates(desc, delta), lo


@pytest.mark.parametrize("hashed", [False, True], ids=["sorted", "hashed"])
@pytest.mark.parametrize("desc", [FACTS, BY_TIME], ids=["int64-key", "timestamp-key"])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_numpy_fold_equals_the_arrow_fold(
    name: str, desc: RelationDesc, hashed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hashed``: the output changes consolidated by the group-by (as many rows are)."""
    print(f"SPATE_TEST_SEED={SEED}")
    if hashed:
        monkeypatch.setattr(int_fold, "SORTED_ROWS", 0)
    rng = random.Random(SEED)
    layout = _layout(desc, LAYOUTS[name])
    for _ in range(150):
        history, delta, lo = _case(rng, desc)
        old = state_of(layout, history)
        known = pa.compute.is_in(delta.column(layout.keys[0]), old.column(layout.keys[0]))
        delta = delta.filter(known)
        if not delta.num_rows:
            continue
        assert applies(layout, delta)
        try:
            want = fold(layout, delta, old, lo=lo)
        except Unfoldable:
            with pytest.raises(Unfoldable):
                fold_ints(layout, delta, old)
            continue
        got = fold_ints(layout, delta, old)
        assert got is not None
        assert got.changes.schema == want.changes.schema
        assert _sorted(consolidate(got.changes)) == _sorted(want.changes)
        assert got.state.schema == want.state.schema
        assert _sorted(got.state) == _sorted(want.state)
        assert _sorted(got.slow) == _sorted(want.slow)
        assert got.fast == want.fast


def test_numpy_fold_declines_what_it_does_not_compute() -> None:
    nullable = RelationDesc.of(("k", INT64, False), ("v", INT64, True), ("w", INT64, False))
    layout = _layout(nullable, {"hi": max_(col("v"))})
    with_null = pa.Table.from_arrays(
        [pa.array([1]), pa.array([None], pa.int64()), pa.array([1]), pa.array([5]), pa.array([1])],
        schema=internal_schema(nullable),
    )
    assert not applies(layout, with_null)
    assert not applies(_layout(FACTS, {"mean": avg(col("v"))}), _updates(FACTS, []))
    assert with_null.column(TIME_COLUMN).to_pylist() == [5]
    assert with_null.column(DIFF_COLUMN).to_pylist() == [1]


@pytest.mark.parametrize("desc", [FACTS, BY_TIME], ids=["int64-key", "timestamp-key"])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_numpy_reduce_from_history_equals_the_arrow_reduce(name: str, desc: RelationDesc) -> None:
    print(f"SPATE_TEST_SEED={SEED}")
    rng = random.Random(SEED + 1)
    layout = _layout(desc, LAYOUTS[name])
    key = layout.keys[0]
    schema = internal_schema(layout.out_desc)
    computed = 0
    for _ in range(150):
        history, delta, lo = _case(rng, desc)
        asked = delta.filter(pa.compute.is_in(delta.column(key), pa.array(_sorted_keys(delta)[:3])))
        rows = pa.concat_tables([history, asked])  # history: a superset of the keys asked
        times = with_from(key_times(asked, layout.key, lo - 1), lo)
        want = reduce_on_driver(
            rows.filter(pa.compute.is_in(rows.column(key), asked.column(key))),
            times,
            layout.key,
            layout.aggregates,
            layout.in_desc,
            layout.out_desc,
        )
        got = reduce_ints(layout, rows, asked, lo)
        if want is None:
            assert got is None
            continue
        try:
            learned = state_of(layout, rows)
        except Unfoldable:
            assert got is None
            continue
        learned = learned.filter(pa.compute.is_in(learned.column(key), asked.column(key)))
        assert got is not None
        changes, state = got
        computed += 1
        assert changes.schema == schema
        assert _sorted(changes) == _sorted(want.cast(schema))
        assert state.schema == learned.schema
        assert _sorted(state) == _sorted(learned)
    assert computed > 50


def _sorted_keys(table: pa.Table) -> list[object]:
    return sorted(set(table.column(0).to_pylist()))
