"""The environment's side of the multi-host test, run on the ``env`` host (a network
namespace) by ``test_multi_host.py``: ``python _multi_host_workload.py CONFIG_JSON``.

Opens an environment with persist on S3 (moto) and PostgreSQL consensus, a cluster of two
compute replicas placed on two other hosts (their Spark jobs run on the standalone cluster of a
fourth), tables, a materialized view with a join and a top-k, an index and a subscribe. Midway
it kills every process of the first replica's host and goes on writing and reading. Prints one
JSON line per phase; the last says whether every check held.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from spate.config import Settings
from spate.environment.api import Environment
from spate.plan.builder import desc
from spate.plan.relation import RelationExpr
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.types import Row
from spate.testing.reference import evaluate

BIDS = RelationDesc.of(("auction", INT64, False), ("price", INT64, False), ("who", TEXT))
AUCTIONS = RelationDesc.of(("id", INT64, False), ("seller", TEXT, False))
READ_TIMEOUT_S = 420.0


def say(phase: str, **data: Any) -> None:
    print(json.dumps({"phase": phase, "t": round(time.monotonic() - START, 1), **data}), flush=True)


START = time.monotonic()


def contents(table: pa.Table) -> Counter[Row]:
    cols = [c for c in table.column_names if c != "_diff"]
    out: Counter[Row] = Counter()
    for r in table.to_pylist():
        out[tuple(r[c] for c in cols)] += 1
    return out


def plan(env: Environment) -> RelationExpr:
    """Each seller's two highest bids (a join and a top-k)."""
    joined = env.get("bids").join(env.get("auctions"), on=[("auction", "id")])
    return joined.select("seller", "auction", "price", "who").top_k(
        ["seller"], order_by=[desc("price"), "auction", "who"], limit=2
    )


def recomputed(env: Environment, at: int) -> Counter[Row]:
    inputs = {env.get(n).id: contents(env.select(n, as_of=at)) for n in ("bids", "auctions")}
    return Counter({r: d for r, d in evaluate(plan(env), inputs, at).items() if d})


def churn(env: Environment, rng: random.Random, live: Counter[Row], n: int) -> int:
    ts = 0
    for _ in range(n):
        if live and rng.random() < 0.3:
            row = rng.choice(sorted(live, key=repr))
            env.delete("bids", [row])
            live[row] -= 1
            if not live[row]:
                del live[row]
        else:
            row = (rng.randint(1, 8), rng.randint(1, 1000), rng.choice(["a", "b", None]))
            ts = env.insert("bids", [row]).timestamp
            live[row] += 1
    row = (rng.randint(1, 8), rng.randint(1, 1000), "last")
    live[row] += 1
    return max(ts, env.insert("bids", [row]).timestamp)


def main() -> int:
    cfg = json.loads(sys.argv[1])
    seed = int(cfg["seed"])
    rng = random.Random(seed)
    say("start", seed=seed)
    import boto3

    boto3.client("s3", endpoint_url=cfg["s3_endpoint"]).create_bucket(Bucket=cfg["bucket"])
    data = Path(cfg["data_dir"])
    settings = Settings(
        data_dir=data,
        persist={"blob": cfg["blob"], "consensus": cfg["consensus"]},
        spark={"master": cfg["spark_master"]},
        log_level="INFO",
    )
    env = Environment.open(data, settings=settings, timeout=300)
    checks: dict[str, bool] = {}
    try:
        env.create_cluster("c", replicas=cfg["replicas"])
        env.create_table("bids", BIDS)
        env.create_table("auctions", AUCTIONS)
        env.insert("auctions", [(a, f"s{a % 3}") for a in range(1, 9)])
        live: Counter[Row] = Counter()
        churn(env, rng, live, 10)
        env.create_materialized_view("best", plan(env), cluster="c")
        env.create_index("best_by_seller", on="best", key=["seller"], cluster="c")
        env.set_retain_history("best", 3_600_000)  # the subscribe reads from before the kill
        say("created")
        hydrated = env.wait_hydrated(timeout=READ_TIMEOUT_S)
        say("hydrated", replicas=[(r.name, r.health, r.hydrated) for r in hydrated.replicas])

        # A subscribe that runs across the loss of a replica host: from t1 until a marker
        # write after everything else.
        t1 = churn(env, rng, live, 15)
        batches: list[list[tuple[int, Row, int]]] = []
        sub_error: list[BaseException] = []
        marker: dict[str, int] = {}

        def subscribe() -> None:
            try:
                for batch in env.subscribe("best", as_of=t1, timeout=READ_TIMEOUT_S):
                    batches.append(batch)
                    if "t" in marker and any(t >= marker["t"] for t, _, _ in batch):
                        return
            except BaseException as e:
                sub_error.append(e)

        sub = threading.Thread(target=subscribe, daemon=True)
        sub.start()
        checks["before_kill"] = contents(env.select("best", timeout=READ_TIMEOUT_S)) == (
            recomputed(env, t1)
        )
        say("before_kill", ok=checks["before_kill"], batches=len(batches))

        # The first replica's host loses every process (the replica and its Spark driver).
        killed = []
        for pid in _ns_pids(cfg["kill_ns"]):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        say("killed", host=cfg["kill_ns"], pids=killed)

        t2 = churn(env, rng, live, 15)
        started = time.monotonic()
        after = contents(env.select("best", timeout=READ_TIMEOUT_S))
        checks["after_kill"] = after == recomputed(env, t2)
        checks["bids_kept"] = contents(env.select("bids")) == live
        say("after_kill", ok=checks["after_kill"], read_s=round(time.monotonic() - started, 1))
        health = {r.name: r.health for r in env.status().replicas}
        checks["survivor_connected"] = health.get("r2") == "connected"
        checks["killed_not_connected"] = health.get("r1") != "connected"
        say("health", replicas=health)

        # The marker: a new seller's bid, which changes the view (so the subscribe sees it).
        env.insert("auctions", [(9, "zmarker")])
        t3 = env.insert("bids", [(9, 5000, "marker")]).timestamp
        live[(9, 5000, "marker")] += 1
        marker["t"] = t3
        sub.join(READ_TIMEOUT_S + 60)
        acc: Counter[Row] = Counter()
        for batch in batches:
            for t, row, diff in batch:
                if t <= t3:
                    acc[tuple(row)] += diff
        expected = recomputed(env, t3)
        checks["subscribe"] = not sub.is_alive() and not sub_error and +acc == expected
        if not checks["subscribe"]:
            say("subscribe_diff", got=repr(sorted(+acc)), expected=repr(sorted(expected)))
        say("subscribe", ok=checks["subscribe"], batches=len(batches), error=repr(sub_error))
    finally:
        env.close()
    say("done", ok=all(checks.values()), checks=checks)
    return 0 if all(checks.values()) else 1


def _ns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


if __name__ == "__main__":
    sys.exit(main())
