"""Recursive (WITH RECURSIVE) on Spark against the reference at every time: a transitive
closure under edges added and removed (removals retract paths that had other derivations
only through them), also of a larger random graph whose paths take many rounds, a counter up
to limits that change, a tree walk while nodes move, an aggregate over the closure, a term
that would yield rows from an empty working table, and the iteration limit as an error at
the times it is hit."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.errors import SpateError
from spate.ids import GlobalId
from spate.render.batch import EngineSettings
from spate.render.dataflow import Dataflow
from spate.render.input import ArrowInputs
from spate.render.operators.recursive import RecursiveNode
from spate.repr.arrow import updates_to_table
from spate.testing.plan_strategies import single_plan_dataflow
from tests.plan.recursive_plans import (
    EDGES_DESC,
    EDGES_ID,
    INPUTS,
    LIMITS_ID,
    PLANS,
    TREE_ID,
    closure,
)
from tests.render.oracle import EVERY_DELTA_LARGE, Update, run_and_check


def _stream(rng: random.Random, make: object, times: int = 9) -> list[Update]:
    """Inserts and deletes of rows drawn by ``make`` over ``0..times``, never below zero."""
    assert callable(make)
    held: dict[tuple[object, ...], int] = {}
    out: list[Update] = []
    for t in range(times):
        for _ in range(rng.randint(0, 3)):
            live = [r for r, m in held.items() if m > 0]
            if live and rng.random() < 0.4:
                row = rng.choice(live)
                diff = -1
            else:
                row = make()
                diff = 1
            held[row] = held.get(row, 0) + diff
            out.append((row, t, diff))
    return out


def _streams(rng: random.Random) -> dict[GlobalId, list[Update]]:
    small = [None, 0, 1, 2, 3, 4]
    return {
        EDGES_ID: _stream(rng, lambda: (rng.choice(small), rng.choice(small))),
        LIMITS_ID: _stream(rng, lambda: (rng.choice([None, 0, 2, 3, 5]),)),
        TREE_ID: _stream(rng, lambda: (rng.randint(0, 5), rng.choice([None, 0, 1, 2, 3]))),
    }


@pytest.mark.parametrize("name", sorted(set(PLANS) - {"guarded"}))  # (its own test below)
def test_recursive_plans_match_reference(
    spark: SparkSession, tmp_path: Path, seed: int, name: str
) -> None:
    """(The large, Spark-only path: test_rounds_run_as_spark_jobs.)"""
    rng = random.Random(seed)
    streams = _streams(rng)
    as_of = rng.randint(0, 2)
    cuts = sorted({rng.randint(as_of + 1, 9) for _ in range(2)} | {as_of + 6})
    dataflow = single_plan_dataflow(PLANS[name], INPUTS, as_of=as_of)
    checked = run_and_check(spark, tmp_path / name, dataflow, streams, INPUTS, cuts)
    assert checked >= 1, seed


def test_iteration_limit_is_an_error_at_the_times_it_is_hit(
    spark: SparkSession, tmp_path: Path
) -> None:
    """UNION ALL over a cycle: reads fail while the cycle is there, and succeed again once an
    edge of it is removed; the dataflow keeps running."""
    plan = closure(distinct=False, max_iterations=20)
    edges = [((1, 2), 0, 1), ((2, 1), 2, 1), ((2, 1), 4, -1)]
    dataflow = single_plan_dataflow(plan, {EDGES_ID: EDGES_DESC}, as_of=0, subscribe_id=None)
    inputs = ArrowInputs.of({EDGES_ID: updates_to_table(EDGES_DESC, [])}, upper=0)
    inputs.append(EDGES_ID, updates_to_table(EDGES_DESC, edges), 6)
    df = Dataflow(
        dataflow,
        inputs,
        spark=spark,
        scratch=tmp_path / "s",
        name="limit",
        settings=EngineSettings(),
    )
    try:
        df.step()
        (ix,) = dataflow.index_exports
        assert df.peek(ix.id, timestamp=1).num_rows == 1
        for t in (2, 3):
            with pytest.raises(SpateError, match="still produced rows after 20 iterations"):
                df.peek(ix.id, timestamp=t)
        assert df.peek(ix.id, timestamp=4).num_rows == 1
    finally:
        df.drop()


def test_closure_of_a_random_graph_under_inserts_and_deletes(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    """A graph of 12 nodes whose edges come and go (a chain first, so that the first paths
    take many rounds), checked at every time."""
    rng = random.Random(seed)
    chain = [((i, i + 1), 0, 1) for i in range(8)]
    held = {e for e, _, _ in chain}
    edges: list[Update] = list(chain)
    for t in range(1, 10):
        for _ in range(rng.randint(1, 4)):
            if held and rng.random() < 0.45:
                e = rng.choice(sorted(held))
                held.discard(e)
                edges.append((e, t, -1))
            else:
                e = (rng.randrange(12), rng.randrange(12))
                if e not in held:
                    held.add(e)
                    edges.append((e, t, 1))
    dataflow = single_plan_dataflow(closure(), {EDGES_ID: EDGES_DESC}, as_of=0)
    checked = run_and_check(
        spark, tmp_path, dataflow, {EDGES_ID: edges}, {EDGES_ID: EDGES_DESC}, [1, 5, 10]
    )
    assert checked >= 10, seed


def test_rounds_run_as_spark_jobs(spark: SparkSession, tmp_path: Path) -> None:
    """A chain of 4 edges takes 4 rounds (the last adds nothing); on the large path each runs
    Spark jobs, and an edge closing a cycle makes the next step run rounds again."""
    chain = [((i, i + 1), 0, 1) for i in range(4)]
    dataflow = single_plan_dataflow(closure(), {EDGES_ID: EDGES_DESC}, as_of=0, subscribe_id=None)
    inputs = ArrowInputs.of({EDGES_ID: updates_to_table(EDGES_DESC, chain)}, upper=1)
    df = Dataflow(
        dataflow, inputs, spark=spark, scratch=tmp_path, name="rounds", settings=EVERY_DELTA_LARGE
    )
    try:
        report = df.step()
        ((_, node),) = df._objects
        assert isinstance(node, RecursiveNode)
        assert node.rounds == 4 and report.actions >= 4
        (ix,) = dataflow.index_exports
        assert df.peek(ix.id, timestamp=0).num_rows == 10  # 4 + 3 + 2 + 1 paths
        inputs.append(EDGES_ID, updates_to_table(EDGES_DESC, [((4, 0), 1, 1)]), 2)
        report = df.step()
        assert report.actions > 0
        assert df.peek(ix.id, timestamp=1).num_rows == 25  # every pair of the 5-cycle
        assert node.rounds == 5
    finally:
        df.drop()


def test_a_time_that_reached_its_fixpoint_gets_no_more_rounds(
    spark: SparkSession, tmp_path: Path
) -> None:
    """One step over two times: at 1 the recursion counts to 3 (three rounds), at 2 (the
    limit gone) it ends after the base. The later rounds, run for time 1, must not evaluate
    the term at time 2 on its empty working table (where "guarded" yields 42)."""
    limits = [((3,), 1, 1), ((3,), 2, -1)]
    dataflow = single_plan_dataflow(PLANS["guarded"], {LIMITS_ID: INPUTS[LIMITS_ID]}, as_of=0)
    checked = run_and_check(
        spark, tmp_path, dataflow, {LIMITS_ID: limits}, {LIMITS_ID: INPUTS[LIMITS_ID]}, [1, 3]
    )
    assert checked >= 3


def test_a_dropped_dataflow_stops_its_recursion_at_the_next_round(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A UNION ALL over a cycle runs to its iteration limit at every step; canceled (its
    dataflow dropped) it stops at its next round instead, so the replica's one step thread is
    free again (it ran a dropped view's 10,000 rounds a step for 20 minutes)."""
    import threading
    import time

    from spate.render.dataflow import DataflowError

    plan = closure(distinct=False, max_iterations=1_000_000)
    edges = [((1, 2), 0, 1), ((2, 1), 0, 1)]
    dataflow = single_plan_dataflow(plan, {EDGES_ID: EDGES_DESC}, as_of=0, subscribe_id=None)
    inputs = ArrowInputs.of({EDGES_ID: updates_to_table(EDGES_DESC, [])}, upper=0)
    inputs.append(EDGES_ID, updates_to_table(EDGES_DESC, edges), 2)
    df = Dataflow(
        dataflow,
        inputs,
        spark=spark,
        scratch=tmp_path / "s",
        name="cycle",
        settings=EngineSettings(),
    )
    rounds: list[int] = []
    original = RecursiveNode.step

    def watched(self: RecursiveNode, ctx: object) -> object:
        timer = threading.Timer(5.0, df.cancel)
        timer.start()
        try:
            return original(self, ctx)  # type: ignore[arg-type]
        finally:
            timer.cancel()
            rounds.append(1)

    RecursiveNode.step = watched  # type: ignore[assignment,method-assign]
    try:
        started = time.monotonic()
        with pytest.raises(DataflowError, match="StepCanceled: cycle-0: dropped after"):
            df.step()
        assert rounds and time.monotonic() - started < 120
    finally:
        RecursiveNode.step = original  # type: ignore[method-assign]
        df.drop()
