"""Reduces that keep per-key accumulators (spate.render.operators.accumulators and
reduce_state) under seeded random inserts and retractions: every export, at every time at or
after the as_of, equals the reference evaluator; keys are folded from their deltas alone (not
only computed from their history); and a dataflow hydrated later from the same inputs (a
replica that restarts, its accumulators gone) is exact from its as_of on.

Each layout of the accumulators is exercised: count(*), count of a nullable column, sum and avg
(the invertible parts, with groups whose values are all NULL: sum and avg NULL, count 0), min
and max of int64, text and timestamps (the per-key summary; retracting a group's extreme reads
its history), directly over an input and over a join keyed by the join key.

Replay a failure with ``SPATE_TEST_SEED=<seed printed> pytest tests/render/test_accumulators_oracle.py``.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spate.ids import GlobalId
from spate.plan.aggregate import AggregateExpr
from spate.plan.builder import avg, col, count, max_, min_, sum_
from spate.plan.relation import Get, RelationExpr
from spate.render.operators import keyed, reduce_state
from spate.repr import INT64, TEXT, TIMESTAMP, RelationDesc
from spate.repr.types import Row
from spate.testing.plan_strategies import single_plan_dataflow
from tests.render.oracle import run_and_check

SEED = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))
FACTS_ID, DIMS_ID = GlobalId.user(1), GlobalId.user(2)
FACTS = RelationDesc.of(
    ("k", INT64, False), ("v", INT64, True), ("s", TEXT, True), ("at", TIMESTAMP, False)
)
DIMS = RelationDesc.of(("id", INT64, False), ("name", TEXT, True))
EPOCH = dt.datetime(2024, 1, 1)

INVERTIBLE: dict[str, AggregateExpr] = {
    "n": count(),
    "nv": count(col("v")),
    "total": sum_(col("v")),
    "mean": avg(col("v")),
}
SUMMARY: dict[str, AggregateExpr] = {
    "lo": min_(col("v")),
    "hi": max_(col("v")),
    "first": min_(col("s")),
    "last": max_(col("at")),
}
LAYOUTS = {
    "invertible": INVERTIBLE,
    "summary": SUMMARY,
    "mixed": {"n": count(), "total": sum_(col("v")), "hi": max_(col("v")), "ns": count(col("s"))},
}


@pytest.fixture
def folds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many keys each fold computed from their deltas alone (not from history)."""
    out: list[int] = []
    real = reduce_state.fold

    def counting(*args: Any, **kwargs: Any) -> Any:
        folded = real(*args, **kwargs)
        out.append(folded.fast)
        return folded

    monkeypatch.setattr(reduce_state, "fold", counting)
    return out


@pytest.fixture
def hydrated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The keys each hydration computed the accumulators of (spate.render.operators.
    hydrate_state; -1: it declined)."""
    out: list[int] = []

    def counted(real: Any) -> Any:
        def counting(state: Any, *args: Any, **kwargs: Any) -> Any:
            lazy = real(state, *args, **kwargs)
            out.append(-1 if lazy is None else (0 if lazy.batch is None else lazy.batch.rows))
            return lazy

        return counting

    for name in ("hydrate_with_state", "hydrate_on_driver"):
        monkeypatch.setattr(keyed, name, counted(getattr(keyed, name)))
    return out


@pytest.fixture
def join_deltas(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Steps of a reduce over a join computed from the join's delta (not its history)."""
    out: list[bool] = []
    real = keyed.folded_over_join

    def counting(*args: Any, **kwargs: Any) -> Any:
        lazy = real(*args, **kwargs)
        out.append(lazy is not None)
        return lazy

    monkeypatch.setattr(keyed, "folded_over_join", counting)
    return out


def _fact(rng: random.Random, keys: int) -> Row:
    v = None if rng.random() < 0.2 else rng.randrange(-5, 30)
    s = None if rng.random() < 0.3 else rng.choice(["a", "b", "é", "zz"])
    at = EPOCH + dt.timedelta(microseconds=rng.randrange(50))
    return (rng.randrange(keys), v, s, at)


def random_streams(
    rng: random.Random, *, keys: int, times: int, per_time: int
) -> dict[GlobalId, list[tuple[Row, int, int]]]:
    """Facts inserted and retracted at random (a third of the retractions take a group's
    largest ``v``, so extremes go), every key retracted to empty now and then; and the
    dimension rows of the keys, one replaced midway."""
    live: list[Row] = []
    facts: list[tuple[Row, int, int]] = []
    for t in range(times):
        for _ in range(per_time):
            if live and rng.random() < 0.3:
                if rng.random() < 0.33:
                    k = rng.choice(live)[0]
                    group = [r for r in live if r[0] == k]
                    row = max(group, key=lambda r: -1 if r[1] is None else r[1])
                else:
                    row = rng.choice(live)
                live.remove(row)
                facts.append((row, t, -1))
            else:
                row = _fact(rng, keys)
                live.append(row)
                facts.append((row, t, 1))
        if t % 4 == 3 and live:  # a whole group goes
            k = rng.choice(live)[0]
            for row in [r for r in live if r[0] == k]:
                live.remove(row)
                facts.append((row, t, -1))
    dims = [((k, f"d{k}"), 0, 1) for k in range(keys)]
    dims += [((0, "d0"), times // 2, -1), ((0, None), times // 2, 1)]
    return {FACTS_ID: facts, DIMS_ID: dims}


def _plan(layout: str, *, over_join: bool) -> RelationExpr:
    facts: RelationExpr = Get(FACTS_ID, FACTS)
    if over_join:
        facts = facts.join(Get(DIMS_ID, DIMS), on=[("k", "id")]).project("k", "v", "s", "at")
    return facts.reduce(["k"], **LAYOUTS[layout])


@pytest.mark.parametrize("over_join", [False, True], ids=["input", "join"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_accumulators_match_the_reference_at_every_time(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    folds: list[int],
    join_deltas: list[bool],
    hydrated: list[int],
    layout: str,
    over_join: bool,
) -> None:
    print(f"seed {SEED}: SPATE_TEST_SEED={SEED} pytest {__file__}")
    rng = random.Random(f"{SEED}-{layout}-{over_join}")
    streams = random_streams(rng, keys=12, times=14, per_time=8)
    inputs = {FACTS_ID: FACTS, DIMS_ID: DIMS} if over_join else {FACTS_ID: FACTS}
    streams = {id: streams[id] for id in inputs}
    plan = _plan(layout, over_join=over_join)
    cuts = [3, 4, 6, 7, 9, 12, 14]  # steps of one time and of several
    dataflow = single_plan_dataflow(plan, inputs, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("acc"), dataflow, streams, inputs, cuts)
    assert sum(folds) > 0, "some keys were folded from their deltas alone"
    assert any(join_deltas) == over_join, "over a join, steps read the join's delta alone"
    snapshot: Counter[Row] = Counter()
    for row, t, diff in streams[FACTS_ID]:
        if t <= 1:  # the hydration's snapshot (as_of 1)
            snapshot[row] += diff
    if +snapshot:  # (a draw may retract every row it inserted before the as_of)
        assert hydrated and hydrated[0] > 0, "the hydration computed the keys' accumulators"
    # A replica that restarts hydrates a new dataflow at a later as_of: its accumulators start
    # empty, are learned from history at each key's first step, and the output stays exact.
    folds.clear()
    later = single_plan_dataflow(plan, inputs, as_of=6)
    run_and_check(spark, tmp_path_factory.mktemp("again"), later, streams, inputs, cuts[3:])
    assert sum(folds) > 0, "after the restart, learned keys were folded again"


@pytest.mark.parametrize("key", ["k", "s"], ids=["int-key", "text-key"])
def test_accumulator_state_compacted_or_beyond_capacity_stays_exact(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    folds: list[int],
    key: str,
) -> None:
    """An integer key's accumulators are found through their sorted keys (reduce_state's
    positions), compacted here at every commit; a text key's by joins. With a capacity below
    the number of keys, keys beyond it are forgotten and computed from history again."""
    from spate.render.batch import EngineSettings

    print(f"seed {SEED}: SPATE_TEST_SEED={SEED} pytest {__file__}")
    rng = random.Random(f"{SEED}-state-{key}")
    monkeypatch.setattr(reduce_state, "_MAX_CHUNKS", 1)
    capacity = rng.choice([6, 1_000_000])
    print(f"capacity (driver_rows) {capacity}")
    streams = {FACTS_ID: random_streams(rng, keys=12, times=14, per_time=4)[FACTS_ID]}
    inputs = {FACTS_ID: FACTS}
    plan = Get(FACTS_ID, FACTS).reduce([key], **LAYOUTS["mixed"])
    dataflow = single_plan_dataflow(plan, inputs, as_of=1)
    settings = EngineSettings(driver_rows=capacity)
    cuts = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    run_and_check(
        spark, tmp_path_factory.mktemp("acc"), dataflow, streams, inputs, cuts, settings=settings
    )
    if capacity > 12 and key == "k":  # (a step whose delta has a NULL key folds nothing)
        assert sum(folds) > 0, "some keys were folded from their deltas alone"


def test_a_group_of_null_values_hydrated_on_spark_is_folded_at_its_next_step(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    folds: list[int],
    hydrated: list[int],
) -> None:
    """A group whose values are all NULL at the as_of (sum NULL, count of values 0), hydrated
    by a Spark job: its accumulated sum is 0, not NULL, so the next step folds the group from
    its delta alone. (Spark's sum of no values is NULL; the accumulators took that NULL, every
    fold of the group failed, and each step dropped every accumulator.) Over a join: a reduce
    over an input hydrates from rows on the driver (pyarrow) here."""
    facts = [((1, None, "a", EPOCH), 0, 1), ((1, None, None, EPOCH), 1, 1)]
    facts += [((2, 4, "b", EPOCH), 0, 1)]
    facts += [((1, 7, "c", EPOCH), 2, 1), ((2, 5, None, EPOCH), 2, 1), ((1, 2, None, EPOCH), 3, 1)]
    dims = [((k, f"d{k}"), 0, 1) for k in (1, 2)]
    inputs = {FACTS_ID: FACTS, DIMS_ID: DIMS}
    streams = {FACTS_ID: facts, DIMS_ID: dims}
    dataflow = single_plan_dataflow(_plan("mixed", over_join=True), inputs, as_of=1)
    run_and_check(spark, tmp_path_factory.mktemp("nulls"), dataflow, streams, inputs, [3, 4])
    assert hydrated and hydrated[0] == 2, f"Spark hydrated both groups ({hydrated})"
    assert sum(folds) >= 2, f"the steps folded the all-NULL group from its delta ({folds})"


def test_a_hydration_with_sums_beyond_the_accumulators_range_declines_and_stays_exact(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, hydrated: list[int]
) -> None:
    big = 2**61
    facts = [((k, big, None, EPOCH), 0, 1) for k in (1, 1, 2)]  # key 1: sum 2**62
    facts = [
        ((k, v, s, at + dt.timedelta(microseconds=i)), t, d)
        for i, ((k, v, s, at), t, d) in enumerate(facts)
    ]
    facts += [((1, 5, None, EPOCH), 2, 1), ((2, 7, None, EPOCH), 3, 1)]
    inputs = {FACTS_ID: FACTS}
    plan = Get(FACTS_ID, FACTS).reduce(["k"], total=sum_(col("v")), n=count())
    dataflow = single_plan_dataflow(plan, inputs, as_of=1)
    run_and_check(
        spark, tmp_path_factory.mktemp("acc"), dataflow, {FACTS_ID: facts}, inputs, [2, 3, 4]
    )
    assert set(hydrated) == {-1}, f"the hydration declined: a sum is 2**62 ({hydrated})"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_hydration_from_rows_on_the_driver_runs_no_spark_job(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    hydrated: list[int],
    layout: str,
) -> None:
    """The snapshot is on the driver (an Arrow table, here larger than ``small_rows`` and
    left unconsolidated, with repeated rows): the reduce's accumulators and output come from
    pyarrow, the hydration runs no Spark job, and every later step is exact."""
    from spate.render.batch import EngineSettings
    from spate.render.dataflow import Dataflow

    print(f"seed {SEED}: SPATE_TEST_SEED={SEED} pytest {__file__}")
    rng = random.Random(f"{SEED}-driver-{layout}")
    streams = random_streams(rng, keys=12, times=8, per_time=6)
    facts = [(_fact(rng, 12), 0, 1) for _ in range(40)]
    facts += facts[:10] + [(row, 1, 2) for row, _, _ in facts[10:15]]
    later = [(row, t + 2, d) for row, t, d in streams[FACTS_ID]]  # after the as_of
    streams = {FACTS_ID: facts + later}
    inputs = {FACTS_ID: FACTS}
    actions: list[int] = []
    real = Dataflow._step_once

    def counting(self: Dataflow, *args: Any) -> Any:
        report = real(self, *args)
        actions.append(report.actions)
        return report

    monkeypatch.setattr(Dataflow, "_step_once", counting)
    plan = Get(FACTS_ID, FACTS).reduce(["k"], **LAYOUTS[layout])
    dataflow = single_plan_dataflow(plan, inputs, as_of=1)
    settings = EngineSettings(small_rows=10)
    cuts = [2, 3, 5, 10]
    run_and_check(
        spark, tmp_path_factory.mktemp("acc"), dataflow, streams, inputs, cuts, settings=settings
    )
    assert hydrated and hydrated[0] > 0, "the hydration computed the keys' accumulators"
    assert actions[0] == 0, "the hydration ran no Spark job"
