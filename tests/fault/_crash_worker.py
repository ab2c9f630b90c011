"""One life of the crash test's environment process (``tests/fault/test_crash_views.py``).

It opens the environment (creating the tables, the materialized views and the cluster on the
first life), checks every view against its recomputation from the tables at one timestamp and
journals what it saw, serves PostgreSQL clients on a free port, and runs two writer threads
through the Python API until it is killed. Every write is journaled before it is issued
(``begin``) and after it is acknowledged (``ack``), each line flushed and fsynced.

Run: ``python -m tests.fault._crash_worker DATA_DIR JOURNAL SEED LIFE``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from spate.environment.api import Environment
from spate.errors import SpateError
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource

GROUPS = 5
VIEWS = {
    "durc": "SELECT count(*) AS n FROM dur",
    "durs": "SELECT grp, count(*) AS n, sum(amount) AS total FROM dur GROUP BY grp",
    "durj": (
        "SELECT d.name, count(*) AS n, sum(t.amount) AS total "
        "FROM dur t JOIN dim d ON t.grp = d.grp GROUP BY d.name"
    ),
    "durk": (
        "SELECT grp, id, amount FROM (SELECT grp, id, amount, row_number() OVER "
        "(PARTITION BY grp ORDER BY amount DESC, id) AS rn FROM dur) AS r WHERE rn <= 2"
    ),
    "dimc": "SELECT count(*) AS n FROM dim",
    "tickm": "SELECT count(*) AS n, max(counter) AS m FROM ticks_counter",
}


class Journal:
    def __init__(self, path: str) -> None:
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
        self._lock = threading.Lock()

    def write(self, **record: object) -> None:
        with self._lock:
            self._f.write(json.dumps(record) + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())


def setup(env: Environment) -> None:
    if "dur" in env.names():
        return
    env.create_cluster("c", replicas=int(os.environ.get("SPATE_CRASH_REPLICAS", "1")))
    env.sql("CREATE TABLE dim (grp bigint NOT NULL, name text NOT NULL)")
    env.sql("INSERT INTO dim VALUES " + ", ".join(f"({g}, 'g{g}')" for g in range(GROUPS)))
    env.sql("CREATE TABLE dur (id bigint NOT NULL, grp bigint NOT NULL, amount bigint NOT NULL)")
    env.create_source("ticks", LoadGeneratorSource(LoadGenerator.COUNTER, tick_interval_ms=200))
    env.sql("SET cluster = c")
    for name, query in VIEWS.items():
        env.sql(f"CREATE MATERIALIZED VIEW {name} IN CLUSTER c AS {query}")


def expected_views(
    dur: list[dict[str, Any]], dim: list[dict[str, Any]], ticks: list[dict[str, Any]]
) -> dict[str, Counter]:
    """Each view recomputed in Python from the tables' (and the source's) rows."""
    names = {r["grp"]: r["name"] for r in dim}
    by_grp: dict[int, list[dict[str, Any]]] = {}
    for r in dur:
        by_grp.setdefault(r["grp"], []).append(r)
    joined: dict[str, tuple[int, int]] = {}
    for r in dur:
        if r["grp"] in names:
            n, s = joined.get(names[r["grp"]], (0, 0))
            joined[names[r["grp"]]] = (n + 1, s + r["amount"])
    top = []
    for g, rows in by_grp.items():
        rows = sorted(rows, key=lambda r: (-r["amount"], r["id"]))[:2]
        top += [(g, r["id"], r["amount"]) for r in rows]
    return {
        "durc": Counter([(len(dur),)]),
        "durs": Counter(
            (g, len(rows), sum(r["amount"] for r in rows)) for g, rows in by_grp.items()
        ),
        "durj": Counter((name, n, s) for name, (n, s) in joined.items()),
        "durk": Counter(top),
        "dimc": Counter([(len(dim),)]),
        "tickm": Counter([(len(ticks), max((r["counter"] for r in ticks), default=None))]),
    }


def check(env: Environment, journal: Journal, life: int) -> None:
    """Read the tables and every view at one timestamp; journal whether each view equals its
    recomputation, and the ids the table holds."""
    deadline = time.monotonic() + 240
    while True:
        try:
            ts = env.status().read_ts
            dur = env.select("dur", as_of=ts, timeout=120).to_pylist()
            dim = env.select("dim", as_of=ts, timeout=120).to_pylist()
            ticks = env.select("ticks_counter", as_of=ts, timeout=120).to_pylist()
            got = {
                name: Counter(
                    tuple(r.values()) for r in env.select(name, as_of=ts, timeout=120).to_pylist()
                )
                for name in VIEWS
            }
            break
        except SpateError as e:  # a replica still starting: try again
            if time.monotonic() > deadline:
                raise
            journal.write(life=life, op="error", error=f"{type(e).__name__}: {e}"[:300])
            time.sleep(1)
    want = expected_views(dur, dim, ticks)
    wrong = {
        n: {"got": sorted(got[n].items())[:8], "want": sorted(want[n].items())[:8]}
        for n in VIEWS
        if got[n] != want[n]
    }
    ids = Counter(r["id"] for r in dur)
    journal.write(
        life=life,
        op="check",
        ts=ts,
        wrong=json.loads(json.dumps(wrong, default=str)),
        ids=sorted(ids),
        duplicated=sorted(i for i, n in ids.items() if n > 1),
    )


def writer(env: Environment, journal: Journal, life: int, w: int, seed: int) -> None:
    rng = random.Random(seed * 1000 + life * 10 + w)
    next_id = (life * 100 + w) * 1_000_000
    while True:
        next_id += 1
        row = (next_id, rng.randrange(GROUPS), rng.randrange(1000))
        journal.write(life=life, op="insert", phase="begin", id=next_id)
        try:
            env.insert("dur", [row])
        except SpateError as e:
            journal.write(life=life, op="error", error=f"{type(e).__name__}: {e}"[:300])
            time.sleep(0.2)
            continue
        journal.write(life=life, op="insert", phase="ack", id=next_id)
        time.sleep(rng.uniform(0, 0.02))


def serve(env: Environment, port_box: list[int], started: threading.Event) -> None:
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import Server, ServerConfig

    async def run() -> None:
        server = Server(EnvironmentEngine(env), ServerConfig(port=0))
        await server.start()
        port_box.append(server.port)
        started.set()
        await asyncio.Event().wait()

    asyncio.run(run())


def main(data_dir: str, journal_path: str, seed: int, life: int) -> None:
    journal = Journal(journal_path)
    env = Environment.open(Path(data_dir))
    setup(env)
    check(env, journal, life)
    port: list[int] = []
    started = threading.Event()
    threading.Thread(target=serve, args=(env, port, started), daemon=True).start()
    started.wait(60)
    for w in range(2):
        threading.Thread(target=writer, args=(env, journal, life, w, seed), daemon=True).start()
    journal.write(life=life, op="ready", pid=os.getpid(), port=port[0])
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
