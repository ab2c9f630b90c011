"""TopKs that keep per-key summaries (spate.render.operators.topk_state) under seeded random
inserts and retractions: every export, at every time at or after the as_of, equals the
reference evaluator.

The streams make groups shrink below ``offset + limit`` and empty, tie on the order columns at
the window's boundary (and repeat whole rows: multiplicities above 1), retract rows from the
top of groups (the summarised rows: a view that falls short reads the group's history), and
bring in keys late. The hydration computes every key's summary; each plan then steps most keys
from their summaries alone, and some known ones from their history after retractions.

Replay a failure with ``SPATE_TEST_SEED=<seed printed> pytest tests/render/test_topk_oracle.py``.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import random
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spate.ids import GlobalId
from spate.plan.evaluation.values import compare_by, compare_rows
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import Get, RelationExpr
from spate.render.operators import keyed, topk_state
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
V_DESC_NULLS_FIRST = ColumnOrder(1, desc=True)
S_ASC_NULLS_FIRST = ColumnOrder(2, nulls_last=False)


@pytest.fixture
def states(monkeypatch: pytest.MonkeyPatch) -> list[topk_state.TopKState]:
    """Every summary state made (to read its counters)."""
    made: list[topk_state.TopKState] = []
    real = topk_state.TopKState.__init__

    def recording(self: topk_state.TopKState, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(topk_state.TopKState, "__init__", recording)
    return made


def _order(order_by: tuple[ColumnOrder, ...]) -> Any:
    return functools.cmp_to_key(lambda a, b: compare_by(order_by, a, b) or compare_rows(a, b))


def random_facts(
    rng: random.Random,
    *,
    keys: int,
    times: int,
    per_time: int,
    order_by: tuple[ColumnOrder, ...],
    group_by: tuple[int, ...] = (0,),
) -> list[tuple[Row, int, int]]:
    """Facts inserted (multiplicity 1 to 3, values drawn from few, so rows tie and repeat)
    and retracted at random: half the retractions take a row from the top of its group (the
    rows alike in the ``group_by`` columns) in ``order_by``, part or all of its multiplicity;
    now and then a whole group goes. Keys ``>= keys / 2`` first appear halfway."""
    live: Counter[Row] = Counter()
    facts: list[tuple[Row, int, int]] = []
    key = _order(order_by)
    for t in range(times):
        known = keys if t >= times // 2 else keys // 2
        for _ in range(per_time):
            rows = [r for r, m in live.items() if m > 0]
            if rows and rng.random() < 0.4:
                row = rng.choice(rows)
                if rng.random() < 0.5:  # from the top of its group
                    mine = [row[c] for c in group_by]
                    group = sorted((r for r in rows if [r[c] for c in group_by] == mine), key=key)
                    row = group[rng.randrange(min(3, len(group)))]
                d = -rng.randrange(1, live[row] + 1)
            else:
                v = None if rng.random() < 0.15 else rng.randrange(4)
                s = None if rng.random() < 0.2 else rng.choice(["a", "b", "é"])
                at = EPOCH + dt.timedelta(microseconds=rng.randrange(3))
                row, d = (rng.randrange(known), v, s, at), rng.choice([1, 1, 2, 3])
            live[row] += d
            facts.append((row, t, d))
        if t % 5 == 4 and live:  # a whole group goes
            k = rng.choice([r for r, m in live.items() if m > 0])[0]
            for row in [r for r, m in live.items() if m > 0 and r[0] == k]:
                facts.append((row, t, -live[row]))
                live[row] = 0
    return facts


def summary_retracted(
    facts: list[tuple[Row, int, int]],
    *,
    at: int,
    window: int,
    order_by: tuple[ColumnOrder, ...],
    group_by: tuple[int, ...],
) -> list[tuple[Row, int, int]]:
    """Facts that make the largest group fall short at time ``at``: first (at ``at - 1``)
    enough new rows that the group is longer than its summary, then the retraction of the
    group's first rows in ``order_by``, the shortest prefix holding ``2·window`` rows, which is
    what its summary holds (the slack, spate.render.operators.topk_state). The summary's view
    is then empty: the key falls short whatever the seed drew before."""
    live: Counter[Row] = Counter()
    for row, _, d in facts:
        live[row] += d
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row, m in live.items():
        if m > 0:
            groups.setdefault(tuple(row[c] for c in group_by), []).append(row)
    largest = max(groups.values(), key=lambda g: sum(live[r] for r in g))
    assert 1 not in group_by, "new rows of the group differ in v"
    new = [(*largest[0][:1], 100 + i, *largest[0][2:]) for i in range(2 * window + 1)]
    out: list[tuple[Row, int, int]] = [(row, at - 1, 1) for row in new]
    live.update(new)
    taken = 0
    for row in sorted([*largest, *new], key=_order(order_by)):
        if taken >= 2 * window:
            break
        out.append((row, at, -live[row]))
        taken += live[row]
    return out


def _facts_plan(over_join: bool) -> RelationExpr:
    facts: RelationExpr = Get(FACTS_ID, FACTS)
    if over_join:
        facts = facts.join(Get(DIMS_ID, DIMS), on=[("k", "id")]).project("k", "v", "s", "at")
    return facts


CASES = {
    # name: (key, order, limit, offset, over a join)
    "by-key-offset": (("k",), (V_DESC_NULLS_FIRST,), 2, 1, False),
    "over-join": (("k",), (V_DESC_NULLS_FIRST, S_ASC_NULLS_FIRST), 3, 0, True),
    "text-key": (("s",), (ColumnOrder(1),), 2, 0, False),
    "global": ((), (ColumnOrder(1, nulls_last=False), ColumnOrder(2, desc=True)), 3, 2, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_topk_summaries_match_the_reference_at_every_time(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    states: list[topk_state.TopKState],
    case: str,
) -> None:
    print(f"seed {SEED}: SPATE_TEST_SEED={SEED} pytest {__file__}")
    key, order_by, limit, offset, over_join = CASES[case]
    rng = random.Random(f"{SEED}-{case}")
    joined: list[bool] = []
    real = keyed.folded_over_join

    def counting(*args: Any, **kwargs: Any) -> Any:
        lazy = real(*args, **kwargs)
        joined.append(lazy is not None)
        return lazy

    monkeypatch.setattr(keyed, "folded_over_join", counting)
    hydrations: list[int] = []
    real_hydrate = keyed.hydrate_summaries

    def hydrating(state: topk_state.TopKState, *args: Any, **kwargs: Any) -> Any:
        lazy = real_hydrate(state, *args, **kwargs)
        hydrations.append(1)
        return lazy

    monkeypatch.setattr(keyed, "hydrate_summaries", hydrating)
    group_by = tuple(FACTS.names.index(k) for k in key)
    facts = random_facts(rng, keys=8, times=16, per_time=10, order_by=order_by, group_by=group_by)
    facts += summary_retracted(
        facts, at=16, window=offset + limit, order_by=order_by, group_by=group_by
    )
    streams = {FACTS_ID: facts, DIMS_ID: [((k, f"d{k}"), 0, 1) for k in range(8)]}
    inputs = {FACTS_ID: FACTS, DIMS_ID: DIMS} if over_join else {FACTS_ID: FACTS}
    plan = _facts_plan(over_join).top_k(list(key), order_by=order_by, limit=limit, offset=offset)
    cuts = [3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 16, 17]  # steps of one time and of several
    dataflow = single_plan_dataflow(plan, inputs, as_of=2)
    streams = {id: streams[id] for id in inputs}
    run_and_check(spark, tmp_path_factory.mktemp("topk"), dataflow, streams, inputs, cuts)
    (state,) = states
    assert hydrations == [1], "the hydration computed the keys' summaries"
    print(f"keys from summaries {state.folded_keys}, from history {state.slow_keys}")
    assert state.folded_keys > state.slow_keys, "most keys were stepped from their summaries"
    assert state.short_keys > 0, "retractions of summarised rows read the history"
    assert any(joined) == over_join, "over a join, steps read the join's delta alone"
    if case == "by-key-offset":
        # A replica that restarts hydrates a new dataflow at a later as_of: its summaries
        # start empty, are learned from history at each key's first step, and stay exact.
        later = single_plan_dataflow(plan, inputs, as_of=9)
        run_and_check(spark, tmp_path_factory.mktemp("again"), later, streams, inputs, cuts[6:])
        assert states[1].folded_keys > 0, "after the restart, learned keys were stepped again"
