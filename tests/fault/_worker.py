"""One process of the fault soak: open the environment, then write, read and change the
catalog at random until killed. Every operation is journaled before it is issued (``begin``)
and after it is acknowledged (``ack``), each line flushed and fsynced, so the test knows what
was acknowledged and what was in flight when the kill came.

Run: ``python -m tests.fault._worker DATA_DIR JOURNAL SEED ROUND``.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import IO

from spate.environment.api import Environment
from spate.errors import SpateError
from spate.plan.builder import col, count, sum_
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource
from spate.repr import INT64, RelationDesc

T = RelationDesc.of(("id", INT64, False), ("grp", INT64, False), ("amount", INT64, False))


def journal(f: IO[str], **record: object) -> None:
    f.write(json.dumps(record) + "\n")
    f.flush()
    os.fsync(f.fileno())


def setup(env: Environment) -> None:
    if "t" in env.names():
        return
    env.create_cluster("c", replicas=1)
    env.create_table("t", T)
    plan = env.get("t").reduce(["grp"], n=count(), total=sum_(col("amount")))
    env.create_materialized_view("totals", plan, cluster="c")
    env.create_source("ticks", LoadGeneratorSource(LoadGenerator.COUNTER, tick_interval_ms=200))


def recompute(t: list[dict[str, int]]) -> list[tuple[int, int, int]]:
    """The rows of ``totals`` over the rows ``t`` of the table, sorted."""
    groups: dict[int, tuple[int, int]] = {}
    for r in t:
        n, s = groups.get(r["grp"], (0, 0))
        groups[r["grp"]] = (n + 1, s + r["amount"])
    return sorted((g, n, s) for g, (n, s) in groups.items())


def view_rows(totals: list[dict[str, int]]) -> list[tuple[int, int, int]]:
    """The rows of ``totals`` as read, sorted: every copy of a row (a view that holds a group
    twice, or an old value of a group beside the new one, is not its recomputation)."""
    return sorted((r["grp"], r["n"], r["total"]) for r in totals)


def check_view(f: IO[str], env: Environment, round_: int) -> None:
    """Read the table and the view at one timestamp; the view must equal its recomputation."""
    ts = env.status().read_ts
    journal(f, round=round_, op="read", phase="begin", ts=ts)
    t = env.select("t", as_of=ts, timeout=5).to_pylist()
    totals = env.select("totals", as_of=ts, timeout=8).to_pylist()
    expected = recompute(t)
    got = view_rows(totals)
    journal(
        f,
        round=round_,
        op="read",
        phase="ack",
        ts=ts,
        ok=got == expected,
        got=str(got),
        want=str(expected),
    )


def main(data_dir: str, journal_path: str, seed: int, round_: int) -> None:
    rng = random.Random(seed * 1000 + round_)
    with open(journal_path, "a", encoding="utf-8") as f:
        env = Environment.open(Path(data_dir))
        setup(env)
        live = {int(r["id"]): r for r in env.select("t", timeout=120).to_pylist()}
        journal(f, round=round_, op="ready", pid=os.getpid())
        next_id = round_ * 1_000_000
        views = 0
        while True:
            choice = rng.random()
            try:
                if choice >= 0.85:
                    check_view(f, env, round_)
                elif choice < 0.55 or not live:
                    next_id += 1
                    row = {"id": next_id, "grp": rng.randrange(5), "amount": rng.randrange(100)}
                    journal(f, round=round_, op="insert", phase="begin", row=row)
                    env.insert("t", [(row["id"], row["grp"], row["amount"])])
                    journal(f, round=round_, op="insert", phase="ack", row=row)
                    live[row["id"]] = row
                elif choice < 0.8:
                    victim = live.pop(rng.choice(sorted(live)))
                    journal(f, round=round_, op="delete", phase="begin", row=victim)
                    env.delete("t", [(victim["id"], victim["grp"], victim["amount"])])
                    journal(f, round=round_, op="delete", phase="ack", row=victim)
                elif choice < 0.85:
                    name = f"v{round_}_{views}"
                    views += 1
                    env.create_view(name, env.get("t").filter(col("amount") > rng.randrange(100)))
                    if rng.random() < 0.5:
                        env.drop(name)
            except SpateError as e:
                # Timeouts while a killed replica comes back, and the like: note and go on.
                journal(f, round=round_, op="error", error=f"{type(e).__name__}: {e}"[:500])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
