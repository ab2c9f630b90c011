"""Reopening an environment resumes each materialized view at its shard's upper: the view's
inputs are held at their durable sinces until the view's dataflow holds them, so the read
policies applied at open cannot move them past the view (no replica needed: the dataflow's
as_of is chosen and installed by the controllers)."""

from __future__ import annotations

import time
from pathlib import Path

from spate.environment.api import Environment
from spate.repr import INT64, RelationDesc


def _view_as_of(env: Environment, name: str) -> int:
    rt = env.runtime
    item = rt.catalog.get(name)
    instance = rt.compute._instance(rt.instance_of("c"))
    as_of = instance.collection(item.id).as_of.as_option()
    assert as_of is not None
    return as_of


def test_a_reopened_view_resumes_at_its_inputs_durable_since(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_cluster("c", replicas=0)  # nothing writes the view: its upper stays at 0
        env.create_table("t", RelationDesc.of(("a", INT64, False)))
        env.insert("t", [(1,)])
        env.create_materialized_view("v", env.get("t"), cluster="c")
        first = _view_as_of(env, "v")
        # The table moves on, its since stays where the view holds it. Its policy (1 s lag,
        # rounded down to a whole second, applied at most every second) wants a since past
        # ``first`` only once the clock is about 2 s past it, and is applied within 1 s after:
        # write until 3.1 s have passed (a fixed number of writes was not enough once they
        # got faster: the since stayed at the policy's own second, below the view's as_of).
        i = 2
        while time.time() * 1000 < first + 3100:
            time.sleep(0.3)
            env.insert("t", [(i,)])
            i += 1
        held = env.runtime.storage.collection_frontiers(env.runtime.catalog.get("t").id).since
        assert held.as_option() == first
    with Environment.open(data) as env:
        # Without the holds, the table's 1 s lag policy moved its since (and the view's as_of)
        # to about its upper - 1 s, past the view's upper. (The since persisted for the table
        # may be the held one rounded down to its policy's whole second: not later.)
        resumed = _view_as_of(env, "v")
        assert first - 1000 < resumed <= first
