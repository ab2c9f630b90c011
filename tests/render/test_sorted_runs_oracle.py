"""Arrangements too large to be resident serve lookups through sorted runs
(spate.render.sorted_run): reduce, top-k, window, a join and a reduce over a join, under random
insertions and retractions, equal the reference evaluator at every time >= as_of, also after a
restart that hydrates a new dataflow on the same scratch directory; and the runs were read.

The thresholds are shrunk so that a few dozen updates make an arrangement "large".
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spate.plan import col, count, desc, max_, min_, row_number
from spate.plan.relation import Get, RelationExpr
from spate.render import arrangement, sorted_run
from spate.render.batch import EngineSettings
from spate.render.operators import topk_state
from spate.render.sorted_run import SortedRun
from spate.testing.plan_strategies import single_plan_dataflow
from tests.plan.fixtures import AUCTIONS_DESC, AUCTIONS_ID, BIDS_DESC, BIDS_ID
from tests.render.oracle import Update, run_and_check

BIDS, AUCTIONS = Get(BIDS_ID, BIDS_DESC), Get(AUCTIONS_ID, AUCTIONS_DESC)
BOTH = {BIDS_ID: BIDS_DESC, AUCTIONS_ID: AUCTIONS_DESC}
AT = dt.datetime(2024, 1, 1)

PLANS: dict[str, RelationExpr] = {
    "reduce": BIDS.reduce(["auction"], top=max_(col("price")), low=min_(col("channel")), n=count()),
    "top_k": BIDS.top_k(["auction"], order_by=[desc("price")], limit=2),
    "window": BIDS.window(["auction"], order_by=[desc("price")], rn=row_number()),
    "join": BIDS.join(AUCTIONS, on=[("auction", "id")]).project("auction", "price", "item"),
    "reduce_over_join": BIDS.join(AUCTIONS, on=[("auction", "id")]).reduce(
        ["auction"], top=max_(col("price")), n=count()
    ),
}

DRIVER_PLANS = ("reduce", "join", "reduce_over_join")


@pytest.fixture
def run_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Shrunk thresholds; the rows each sorted-run lookup returned."""
    monkeypatch.setattr(arrangement, "LOOKUP_MAX_ROWS", 12)
    monkeypatch.setattr(arrangement, "INDEX_MIN_ROWS", 4)
    monkeypatch.setattr(sorted_run, "RUN_GROUP_ROWS", 2)
    reads: list[int] = []
    real = SortedRun.lookup

    def counting(self: SortedRun, *args: Any, **kwargs: Any) -> Any:
        out = real(self, *args, **kwargs)
        if out is not None:
            reads.append(out.num_rows)
        return out

    monkeypatch.setattr(SortedRun, "lookup", counting)
    return reads


def _streams(rng: random.Random, max_time: int) -> dict[Any, list[Update]]:
    """Bids and auctions over a few keys; about a third of the updates after time 0 retract a
    live row (each retraction after its insertion)."""
    out: dict[Any, list[Update]] = {BIDS_ID: [], AUCTIONS_ID: []}
    live: dict[Any, list[tuple[Any, ...]]] = {BIDS_ID: [], AUCTIONS_ID: []}
    n = 0
    for t in range(max_time):
        for _ in range(rng.randint(20, 40) if t == 0 else rng.randint(0, 8)):
            n += 1
            which = BIDS_ID if rng.random() < 0.75 else AUCTIONS_ID
            rows = live[which]
            if t > 0 and rows and rng.random() < 0.35:
                row = rows.pop(rng.randrange(len(rows)))
                out[which].append((row, t, -1))
                continue
            key = rng.randrange(8)
            when = AT + dt.timedelta(seconds=n)
            if which == BIDS_ID:
                channel = rng.choice(["a", "b", None])
                row = (key, rng.randrange(5), rng.randrange(50), channel, when)
            else:
                row = (key, rng.choice(["x", "y", None]), n, 1, float(n), when)
            rows.append(row)
            out[which].append((row, t, 1))
    return out


@pytest.mark.parametrize("name", sorted(PLANS))
def test_sorted_runs_match_the_reference_and_after_a_restart(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    run_reads: list[int],
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    name: str,
) -> None:
    rng = random.Random(f"{seed}-{name}")
    plan = PLANS[name]
    if name == "top_k":  # steps from the groups' history, not from per-key summaries (which
        # may answer every step without a lookup; tests/render/test_topk_oracle.py has them)
        monkeypatch.setattr(topk_state, "supported", lambda *_: False)
    inputs = {id: d for id, d in BOTH.items() if id in plan.depends_on()}
    streams = {id: s for id, s in _streams(rng, 9).items() if id in inputs}
    scratch = tmp_path_factory.mktemp("runs")
    # small_rows 0: spines of several batches (else each step's batch merges into one);
    # driver_rows 0: Spark computes every step over what the runs' lookups found
    settings = EngineSettings(
        small_rows=rng.choice([20_000, 0]), driver_rows=rng.choice([0, 1_000_000])
    )
    print(f"settings: {settings}")
    cuts = sorted({rng.randrange(2, 9) for _ in range(2)} | {10})
    dataflow = single_plan_dataflow(plan, inputs, as_of=1)
    run_and_check(spark, scratch, dataflow, streams, inputs, cuts, settings=settings)
    # a replica restarted on the same scratch directory hydrates at a later as_of
    as_of = cuts[0]
    later = [c for c in cuts if c > as_of] or [as_of + 1]
    dataflow = single_plan_dataflow(plan, inputs, as_of=as_of)
    run_and_check(spark, scratch, dataflow, streams, inputs, later, settings=settings)
    # (else no step looks keys up: top-k and window never reduce on the driver)
    if settings.small_rows or (settings.driver_rows and name in DRIVER_PLANS):
        assert run_reads, "no step looked keys up in a sorted run"


@pytest.mark.parametrize("name", ["reduce", "join", "reduce_over_join"])
def test_a_hydration_leaves_its_large_batches_sorted_for_the_steps_lookups(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    run_reads: list[int],
    seed: int,
    name: str,
) -> None:
    """The snapshot's batch is written as a sorted run by the column the operator looks keys
    up by when it is appended: no later step sorts a batch at its first lookup."""
    resorts: list[int] = []
    real = arrangement.Arrangement._resort

    def counting(self: arrangement.Arrangement, i: int, part: Any) -> Any:
        resorts.append(part.rows)
        return real(self, i, part)

    monkeypatch.setattr(arrangement.Arrangement, "_resort", counting)
    rng = random.Random(f"{seed}-hydrated-{name}")
    plan = PLANS[name]
    inputs = {id: d for id, d in BOTH.items() if id in plan.depends_on()}
    streams = {id: s for id, s in _streams(rng, 9).items() if id in inputs}
    dataflow = single_plan_dataflow(plan, inputs, as_of=1)
    settings = EngineSettings(small_rows=20_000, driver_rows=1_000_000)
    scratch = tmp_path_factory.mktemp("runs")
    run_and_check(spark, scratch, dataflow, streams, inputs, [2, 4, 6, 10], settings=settings)
    assert run_reads, "steps looked keys up in sorted runs"
    assert resorts == [], "no step sorted a batch"
