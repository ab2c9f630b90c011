"""The ``spate_catalog`` relations with real replica and storage processes: a killed replica's
health row changes within seconds, a source's statistics count exactly the rows it ingested,
and the lag of every collection streams through a SUBSCRIBE."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.environment.api import Environment
from spate.protocol.storage_desc import FileFormat, FileSource
from spate.repr import INT64, TEXT, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("introspection") / "data")
    try:
        e.create_cluster("c", replicas=["r1"])
        e.create_table("t", DESC)
        e.insert("t", [(i, f"v{i}") for i in range(5)])
        e.create_materialized_view("t_mv", e.get("t"), cluster="c")
        e.create_index("t_by_k", on="t_mv", key=["k"], cluster="c")
        e.wait_hydrated(timeout=600)
        yield e
    finally:
        e.close()


def _sql(env: Environment, text: str) -> list[dict[str, Any]]:
    result = env.sql(text)
    assert isinstance(result, pa.Table)
    return result.to_pylist()


def _replica(env: Environment) -> dict[str, Any]:
    (row,) = _sql(env, "SELECT * FROM spate_catalog.replicas WHERE cluster = 'c' AND name = 'r1'")
    return row


def test_hydration_and_dataflow_statistics_per_replica(env: Environment) -> None:
    rows = _sql(env, "SELECT name, replica, hydrated FROM spate_catalog.hydration")
    assert sorted((r["name"], r["replica"], r["hydrated"]) for r in rows) == [
        ("t_by_k", "r1", True),
        ("t_mv", "r1", True),
    ]
    env.insert("t", [(100, "x")])
    assert env.select("t_mv").num_rows == 6
    stats = {r["name"]: r for r in _sql(env, "SELECT * FROM spate_catalog.dataflow_statistics")}
    assert stats.keys() == {"t_mv", "t_by_k"}
    # the replica reports its counts about once a second: wait for the first report of a step
    query = "SELECT steps, replica FROM spate_catalog.dataflow_statistics WHERE name = 't_mv'"
    row = _poll(env, query, lambda r: (r["steps"] or 0) >= 1)
    assert row["steps"] >= 1 and row["replica"] == "r1", row


def _poll(env: Environment, query: str, ok: Any, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        (row,) = _sql(env, query)
        if ok(row) or time.monotonic() > deadline:
            return row
        time.sleep(0.3)


def test_dataflow_statistics_are_what_the_replica_counted(env: Environment) -> None:
    query = (
        "SELECT steps, spark_jobs, step_time_ms, rows_in, rows_out"
        " FROM spate_catalog.dataflow_statistics WHERE name = 't_mv' AND replica = 'r1'"
    )
    # the replica reports about once a second: the row fills in (it hydrated from 5 rows)
    before = _poll(env, query, lambda r: (r["rows_in"] or 0) >= 5)
    assert before["rows_in"] >= 5 and before["rows_out"] >= 5, before
    assert before["steps"] >= 1 and before["step_time_ms"] > 0, before
    assert before["spark_jobs"] is not None and before["spark_jobs"] >= 0, before
    n = 7
    env.insert("t", [(1000 + i, f"n{i}") for i in range(n)])
    after = _poll(env, query, lambda r: r["rows_in"] >= before["rows_in"] + n)
    print(f"dataflow_statistics of t_mv: {before} -> {after}")
    assert after["rows_in"] >= before["rows_in"] + n, (before, after)
    assert after["rows_out"] >= before["rows_out"] + n, (before, after)
    assert after["steps"] > before["steps"], (before, after)
    assert after["step_time_ms"] >= before["step_time_ms"], (before, after)
    assert after["spark_jobs"] >= before["spark_jobs"], (before, after)


def test_lag_of_every_collection_streams_through_a_subscribe(env: Environment) -> None:
    names = {r["name"] for r in _sql(env, "SELECT name FROM spate_catalog.objects")}
    stream = env.subscribe("spate_catalog.frontiers", timeout=120)
    try:
        snapshot = next(stream)
        live = {row[1]: row for _t, row, diff in snapshot if diff > 0}
        # every collection has a row (sinks and views would have none: there are none here)
        assert live.keys() == names
        assert all(row[6] is not None and row[6] >= 0 for row in live.values())
        # as the uppers move, each row is retracted and added again with the new lag
        changed: set[str] = set()
        deadline = time.monotonic() + 60
        while changed != names and time.monotonic() < deadline:
            for _t, row, diff in next(stream):
                if diff > 0:
                    changed.add(row[1])
        assert changed == names
    finally:
        stream.close()


def test_a_killed_replica_changes_its_health_row_within_5_s(env: Environment) -> None:
    before = _replica(env)
    assert (before["status"], before["process"]) == ("connected", "online"), before
    pid = env.runtime.orchestrator.pid("c-r1")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    row = before
    while time.monotonic() - killed < 5:
        row = _replica(env)
        if (row["status"], row["process"], row["restarts"]) != (
            before["status"],
            before["process"],
            before["restarts"],
        ):
            break
        time.sleep(0.1)
    took = time.monotonic() - killed
    print(f"the replicas row changed {took:.2f} s after the kill: {before} -> {row}")
    assert row != before, f"no change within {took:.1f} s: {row}"
    assert took < 5
    # and it recovers: restarted by the orchestrator, hydrated again
    env.wait_hydrated(timeout=600)
    after = _replica(env)
    assert after["restarts"] == before["restarts"] + 1 or after["failures"] > before["failures"]


def test_a_source_counts_exactly_the_rows_it_ingested(env: Environment, tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    n = 137
    pq.write_table(
        pa.table({"k": pa.array(range(n), pa.int64()), "v": [f"r{i}" for i in range(n)]}),
        incoming / "part-0.parquet",
    )
    env.create_source("f", FileSource(str(incoming), FileFormat.PARQUET), desc=DESC)
    assert env.select("f_files", timeout=120).num_rows == n
    query = (
        "SELECT name, rows, bytes, errors, committed_frontier FROM spate_catalog.source_statistics"
    )
    deadline = time.monotonic() + 60
    stats: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        stats = {r["name"]: r for r in _sql(env, query)}
        if stats.get("f_files", {}).get("rows") == n:
            break
        time.sleep(0.5)
    assert stats["f_files"]["rows"] == n, stats
    assert stats["f"]["rows"] == n  # the source counts what its subsources received
    assert stats["f"]["bytes"] > 0 and stats["f"]["errors"] == 0
    assert stats["f_files"]["committed_frontier"] is not None
    # nothing more arrives: the count stays exact
    time.sleep(2)
    assert {r["name"]: r["rows"] for r in _sql(env, query)}["f_files"] == n


def test_a_waiting_peek_is_in_flight_until_answered(env: Environment) -> None:
    import threading

    at = env.runtime.clock.now_millis() + 4_000  # the index will not be complete there yet
    answered: list[int] = []
    reader = threading.Thread(  # (small_reads=False: a peek of the index, never persist)
        target=lambda: answered.append(
            env.select("t_mv", as_of=at, timeout=120, small_reads=False).num_rows
        )
    )
    reader.start()
    seen: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline and reader.is_alive():
            rows = _sql(env, "SELECT target, timestamp, cluster FROM spate_catalog.peeks")
            seen = [r for r in rows if r["timestamp"] == at]
    finally:
        reader.join(120)
    # the index's peek, or the view's persisted contents read by the replica while the index
    # has not hydrated yet (the read plan's warm start)
    assert [(r["timestamp"], r["cluster"]) for r in seen] == [(at, "c")]
    assert seen[0]["target"] in ("t_by_k", "t_mv")
    assert answered and answered[0] >= 5
    rows = _sql(env, "SELECT timestamp FROM spate_catalog.peeks")
    assert at not in [r["timestamp"] for r in rows]
