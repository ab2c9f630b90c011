"""The warm start: after a reopen, reads of indexed materialized views are answered from persist
while their indexes rehydrate, and ``spate serve`` starts the default cluster's replicas at once
and reports their progress."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from spate.cli.serve import warm_start
from spate.environment.api import Environment
from spate.environment.read_plan import FastPathLookup, PersistRead, plan_read
from spate.plan.builder import col, lit


def _route(env: Environment, sql: str) -> str:
    lines = [str(r["Optimized Plan"]) for r in env.sql(f"EXPLAIN {sql}").to_pylist()]
    return next(line for line in lines if line.startswith("Read plan:"))


def test_reopened_views_are_read_from_persist_until_their_indexes_hydrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_cluster("c", replicas=1)
        env.sql("SET cluster = c; CREATE TABLE items (id bigint NOT NULL, v text)")
        env.sql("INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        env.sql("CREATE MATERIALIZED VIEW mv AS SELECT id, v FROM items WHERE id > 1")
        env.sql("CREATE INDEX mv_id ON mv (id)")
        env.wait_hydrated(timeout=600)
        assert "fast path: lookup of index mv_id" in _route(env, "SELECT v FROM mv WHERE id = 2")
    with Environment.open(data) as env:
        compute = env.runtime.compute
        # the replica is starting again: until the index has hydrated, persist answers
        monkeypatch.setattr(compute, "collection_hydrated", lambda *a: False)
        peeks: list[Any] = []
        peek = compute.peek
        monkeypatch.setattr(compute, "peek", lambda *a, **k: (peeks.append(a), peek(*a, **k))[1])
        session = env.sql_session()
        session.sql("SET transaction_isolation = 'serializable'")
        assert session.sql("SELECT v FROM mv WHERE id = 2").to_pylist() == [{"v": "b"}]
        assert sorted(r["id"] for r in session.sql("SELECT * FROM mv").to_pylist()) == [2, 3]
        assert peeks == []  # no replica was asked
        assert _route(env, "SELECT v FROM mv WHERE id = 2").startswith("Read plan: persist read")
        lookup = env.get("mv").filter(col("id").eq(lit(2)))
        assert isinstance(plan_read(env.runtime, lookup, "c"), PersistRead)
        monkeypatch.setattr(compute, "collection_hydrated", lambda *a: True)
        assert isinstance(plan_read(env.runtime, lookup, "c"), FastPathLookup)
        monkeypatch.undo()


def test_warm_start_creates_the_default_cluster_and_reports_until_ready(tmp_path: Path) -> None:
    with Environment.open(tmp_path / "data") as env:
        assert not env.runtime.catalog.clusters
        lines: list[str] = []
        stop = threading.Event()
        thread = threading.Thread(target=warm_start, args=(env, lines.append, stop, 0.2))
        thread.start()
        thread.join(timeout=600)
        stop.set()
        default = env.runtime.settings.default_cluster
        assert [c.name for c in env.runtime.catalog.clusters] == [default]
        assert lines[0].startswith(f"spate: starting cluster {default}")
        assert any("0/1 replicas connected" in line or "1/1 replicas" in line for line in lines)
        assert lines[-1].startswith("spate: replicas ready after"), lines


def test_warm_start_stops_quietly_when_the_environment_closes(tmp_path: Path) -> None:
    env = Environment.open(tmp_path / "data")
    env.close()
    lines: list[str] = []
    warm_start(env, lines.append, threading.Event())
    assert lines == []
