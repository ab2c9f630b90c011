"""Crashes of every process combination never leave a materialized view wrong.

An environment process (``tests/fault/_crash_worker.py``) serves PostgreSQL clients and
writes through the Python API (two writers); the test writes through pgwire (two more). Every
few seconds the test SIGKILLs a random set of processes — the environment process, its compute
replica with the replica's Spark JVM, its storage replica, or all of them at once — and starts
the environment again. After every restart the worker reads the tables and every view (a count,
sums per group, a join, a top-k, an aggregate of a load generator source) at one timestamp: each view must equal its recomputation from
the tables, no acknowledged row may be lost and none duplicated.

The seed is printed with the command that replays it. ``SPATE_CRASH_ROUNDS`` sets the number
of crashes (1 by default, the CI size; the soak: ``SPATE_CRASH_ROUNDS=20``), and
``SPATE_CRASH_REPLICAS`` the replicas of the views' cluster (1; with 2, both write every view).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.fault._harness import (
    kill_tree,
    processes_of,
    read_journal,
    start_worker,
    wait_ready,
)

ROUNDS = int(os.environ.get("SPATE_CRASH_ROUNDS", "1"))

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600 + 600 * ROUNDS)]
KILL_SETS = [
    ("environment",),
    ("environment", "compute"),
    ("environment", "jvm"),
    ("environment", "storage"),
    ("environment", "compute", "storage"),
    ("environment", "compute", "storage"),
]
"""What a crash kills: the environment process (the controllers and the pgwire server), the
compute replica with its Spark JVM, the JVM alone, the storage replica. "all" twice as often."""


def _service_tree(data: Path, prefix: str) -> list[psutil.Process]:
    """A replica service's process and its children (the Spark JVM)."""
    services = data / "services"
    out: list[psutil.Process] = []
    for sdir in sorted(services.iterdir()) if services.exists() else []:
        pid_file = sdir / "pid"
        if sdir.name.startswith(prefix) and pid_file.exists():
            with contextlib.suppress(psutil.NoSuchProcess, ValueError):
                p = psutil.Process(int(pid_file.read_text()))
                out += [*p.children(recursive=True), p]
    return out


class PgWriter(threading.Thread):
    """Inserts rows through pgwire (autocommit), noting which were acknowledged."""

    def __init__(self, port: int, life: int, w: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.life, self.w = port, life, w
        self.rng = random.Random(seed * 7 + life * 10 + w)
        self.acked: set[int] = set()
        self.in_flight: set[int] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        import psycopg

        next_id = (self.life * 100 + 50 + self.w) * 1_000_000
        try:
            with psycopg.connect(
                f"postgresql://spate@127.0.0.1:{self.port}/spate", autocommit=True
            ) as conn:
                while not self.stop.is_set():
                    next_id += 1
                    self.in_flight.add(next_id)
                    conn.execute(
                        "INSERT INTO dur VALUES (%s, %s, %s)",
                        (next_id, self.rng.randrange(5), self.rng.randrange(1000)),
                    )
                    self.in_flight.discard(next_id)
                    self.acked.add(next_id)
                    time.sleep(self.rng.uniform(0, 0.02))
        except psycopg.Error:
            pass  # the server was killed


def test_views_stay_exact_through_crashes_of_every_process_set(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data"
    journal = tmp_path / "journal.jsonl"
    pg_acked: set[int] = set()
    pg_in_flight: set[int] = set()
    killed: list[tuple[str, ...]] = []
    try:
        for life in range(ROUNDS + 1):
            proc = start_worker(
                "tests.fault._crash_worker",
                data,
                journal,
                seed,
                life,
                tmp_path / f"life-{life}.log",
            )
            ready = wait_ready(journal, "life", life, proc, within=400)
            if life == ROUNDS:  # the last life only checks
                for p in [psutil.Process(proc.pid), *_service_tree(data, "")]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        p.kill()
                proc.wait()
                break
            writers = [PgWriter(int(ready["port"]), life, w, seed) for w in range(2)]
            for w in writers:
                w.start()
            time.sleep(rng.uniform(2.0, 6.0))
            victims = rng.choice(KILL_SETS)
            procs = [psutil.Process(proc.pid)]
            if "compute" in victims:
                procs += _service_tree(data, "c-")
            if "jvm" in victims:
                procs += [p for p in _service_tree(data, "c-") if "java" in p.name()]
            if "storage" in victims:
                procs += _service_tree(data, "storage")
            print(f"life {life}: SIGKILL {', '.join(victims)}: {[p.pid for p in procs]}")
            killed.append(victims)
            for p in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.send_signal(signal.SIGKILL)
            proc.wait()
            for w in writers:
                w.stop.set()
                w.join(30)
                pg_acked |= w.acked
                pg_in_flight |= w.in_flight

        records = read_journal(journal)
        api_acked = {
            int(r["id"]) for r in records if r.get("op") == "insert" and r["phase"] == "ack"
        }
        api_begun = {
            int(r["id"]) for r in records if r.get("op") == "insert" and r["phase"] == "begin"
        }
        acked = api_acked | pg_acked
        in_flight = (api_begun - api_acked) | pg_in_flight
        checks = [r for r in records if r.get("op") == "check"]
        assert [c["life"] for c in checks] == list(range(ROUNDS + 1))
        print(
            f"seed={seed}: {len(api_acked)} API and {len(pg_acked)} pgwire inserts acknowledged, "
            f"{len(in_flight)} in flight at a kill; kills: {killed}"
        )
        for c in checks:
            life = int(c["life"])
            assert c["wrong"] == {}, (
                f"life {life}: views differ from their recomputation: {c['wrong']}"
            )
            assert c["duplicated"] == [], f"life {life}: rows written twice: {c['duplicated'][:10]}"
            present = set(c["ids"])
            # Everything acknowledged in an earlier life must be there after the restart.
            before = {
                int(r["id"])
                for r in records
                if r.get("op") == "insert" and r["phase"] == "ack" and int(r["life"]) < life
            } | {i for i in pg_acked if i // 1_000_000 // 100 < life}
            lost = sorted(before - present - in_flight)
            assert lost == [], f"life {life}: acknowledged inserts lost: {lost[:10]}"
            unknown = sorted(present - acked - in_flight)
            assert unknown == [], f"life {life}: rows nobody wrote: {unknown[:10]}"
        deadline = time.monotonic() + 60
        while (left := processes_of(data)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left == [], f"processes left behind: {[p.pid for p in left]}"
    finally:
        for p in processes_of(data):
            kill_tree(p)
