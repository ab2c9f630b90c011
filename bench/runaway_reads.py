"""Benchmark: other sessions' indexed reads while a runaway one-off runs on the same cluster.

One environment, a cluster of one replica (Spark ``local[2]``), a table ``t`` of 10 rows and a
table ``k`` with an index on the cluster. Through ``spate serve``'s server (in this process) a
session runs serializable point reads of the index (``SELECT v FROM k WHERE id = 2``, answered
from the replica's memory, no Spark job) back to back, in two phases per round:

* the baseline: alone, for ``--seconds``;
* beside a runaway: another session runs a ten-way cross join of ``t`` (10^10 pairs, filtered
  to none: CPU bound, both of Spark's cores) for ``--seconds``, then cancels it (57014).

Reported per phase: p50/p99/max latency of the reads (target: p99 <= 100 ms beside the
runaway), and the runaway phase's p99 as a ratio of the baseline's, measured in the same run so
that both see the same machine load; also how long the replica took to be idle again after the
cancel (its process and JVM using under a quarter of a core). Results go to
``bench/results/runaway_reads.json``.

    python bench/runaway_reads.py [--rounds 3] [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench._results import write_result
from spate.environment.api import Environment
from spate.environment.base import call
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.protocol.compute import ComputeParameters

WAYS = 10
RUNAWAY = (
    "SELECT t0.a FROM "
    + ", ".join(f"t t{i}" for i in range(WAYS))
    + " WHERE "
    + " + ".join(f"t{i}.a" for i in range(WAYS))
    + " < 0"
)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stats(latencies: list[float]) -> dict[str, float]:
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "reads": len(latencies),
        "p50_ms": round(q[49], 2),
        "p99_ms": round(q[98], 2),
        "max_ms": round(max(latencies), 2),
    }


def _reads(dsn: str, seconds: float) -> list[float]:
    out = []
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET cluster = c")
        c.execute("SET transaction_isolation = serializable")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            assert c.execute("SELECT v FROM k WHERE id = 2").fetchall() == [("two",)]
            out.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.01)
    return out


def _replica_pids(data_dir: Path) -> list[int]:
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--role" in cmd and b"compute" in cmd and str(data_dir).encode() in b" ".join(cmd):
            pid = int(p.name)
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            return [pid, *(int(c) for c in children)]
    raise SystemExit(f"no replica process of {data_dir}")


def _cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def _idle_after(pids: list[int], since: float) -> float:
    while True:
        before, t0 = _cpu_s(pids), time.monotonic()
        time.sleep(0.25)
        if (_cpu_s(pids) - before) / (time.monotonic() - t0) < 0.25:
            return time.monotonic() - since
        if time.monotonic() - since > 30:
            return float("inf")


def _runaway_phase(dsn: str, seconds: float, pids: list[int]) -> tuple[list[float], float]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SET cluster = c")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            conn.execute(RUNAWAY).fetchall()
        except psycopg.errors.QueryCanceled as e:
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)  # the runaway's Spark job is running
    latencies = _reads(dsn, seconds)
    conn.cancel_safe()
    thread.join(60)
    ended = time.monotonic()
    conn.close()
    assert errors, "the runaway was not canceled"
    return latencies, _idle_after(pids, ended)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    baseline: list[float] = []
    beside: list[float] = []
    idle: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = Environment.open(Path(tmp) / "data")
        try:
            env.create_cluster("c", replicas=["r1"])
            env.sql("CREATE TABLE t (a bigint NOT NULL)")
            env.sql("INSERT INTO t VALUES " + ", ".join(f"({i})" for i in range(10)))
            env.sql("CREATE TABLE k (id bigint NOT NULL, v text)")
            env.sql("INSERT INTO k VALUES (1, 'one'), (2, 'two')")
            env.sql("SET cluster = c")
            env.sql("CREATE INDEX k_by_id ON k (id)")
            assert env.select("k", timeout=280).num_rows == 2
            params = ComputeParameters(max_one_off_rows=10**WAYS)  # the runaway may run
            env._submit(call(lambda: env.runtime.compute.update_configuration(params)), 10)
            pids = _replica_pids(env.runtime.layout.data_dir)
            server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
            dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=spate sslmode=disable"
            try:
                for r in range(args.rounds):
                    alone = _reads(dsn, args.seconds)
                    loaded, idle_s = _runaway_phase(dsn, args.seconds, pids)
                    baseline += alone
                    beside += loaded
                    idle.append(idle_s)
                    print(
                        f"round {r}: alone {_stats(alone)}; beside the runaway "
                        f"{_stats(loaded)}; replica idle {idle_s:.2f} s after the cancel"
                    )
            finally:
                server.close()
        finally:
            env.close()
    figures: dict[str, Any] = {
        "baseline": _stats(baseline),
        "beside_runaway": _stats(beside),
        "p99_ratio_to_baseline": round(_stats(beside)["p99_ms"] / _stats(baseline)["p99_ms"], 2),
        "replica_idle_after_cancel_s": [round(x, 2) for x in idle],
        "target_p99_ms": 100,
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
    print(figures)
    print(f"wrote {write_result('runaway_reads', figures)}")


if __name__ == "__main__":
    main()
