"""A seeded fault-injection soak: environment processes write, read and change the catalog
while the environment process, its compute replica and its storage replica are killed with
SIGKILL at random. At the end no acknowledged write is lost, nothing is duplicated, the
materialized view equals its recomputation, every read along the way was consistent, and no
process is left behind.

The seed is printed with the command that replays it; ``SPATE_SOAK_ROUNDS`` sets the number of
kills of the environment (3 by default, the CI size).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from spate.environment.api import Environment
from tests.fault._harness import (
    kill_tree,
    processes_of,
    read_journal,
    start_worker,
    wait_ready,
)
from tests.fault._worker import recompute, view_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

ROUNDS = int(os.environ.get("SPATE_SOAK_ROUNDS", "3"))


def _service_pid(data: Path, prefix: str) -> int | None:
    services = data / "services"
    if not services.exists():
        return None
    for sdir in sorted(services.iterdir()):
        pid_file = sdir / "pid"
        if sdir.name.startswith(prefix) and pid_file.exists():
            pid = int(pid_file.read_text())
            if psutil.pid_exists(pid):
                return pid
    return None


def test_no_acknowledged_write_is_lost_under_random_kills(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data"
    journal = tmp_path / "journal.jsonl"
    try:
        for round_ in range(ROUNDS):
            proc = start_worker(
                "tests.fault._worker",
                data,
                journal,
                seed,
                round_,
                tmp_path / f"worker-{round_}.log",
            )
            try:
                wait_ready(journal, "round", round_, proc, within=300)
                deadline = time.monotonic() + rng.uniform(6.0, 15.0)
                while time.monotonic() < deadline:
                    time.sleep(rng.uniform(0.3, 1.5))
                    victim = rng.random()
                    if victim < 0.05:
                        pid = _service_pid(data, "c-")
                        if pid is not None:
                            print(f"round {round_}: SIGKILL compute replica {pid}")
                            os.kill(pid, signal.SIGKILL)
                    elif victim < 0.15:
                        pid = _service_pid(data, "storage")
                        if pid is not None:
                            print(f"round {round_}: SIGKILL storage replica {pid}")
                            os.kill(pid, signal.SIGKILL)
            finally:
                print(f"round {round_}: SIGKILL environment process {proc.pid}")
                proc.kill()
                proc.wait()

        records = read_journal(journal)
        acked: dict[tuple[str, int], dict[str, object]] = {}
        begun: dict[tuple[str, int], dict[str, object]] = {}
        for r in records:
            if r.get("op") in ("insert", "delete"):
                row = r["row"]
                assert isinstance(row, dict)
                key = (str(r["op"]), int(row["id"]))
                (acked if r["phase"] == "ack" else begun)[key] = row
        in_flight = {k[1] for k in begun if k not in acked}
        inserted = {k[1] for k in acked if k[0] == "insert"}
        deleted = {k[1] for k in acked if k[0] == "delete"}
        bad_reads = [
            r for r in records if r.get("op") == "read" and r.get("phase") == "ack" and not r["ok"]
        ]
        reads = sum(1 for r in records if r.get("op") == "read" and r.get("phase") == "ack")
        print(
            f"seed={seed}: {len(inserted)} inserts and {len(deleted)} deletes acknowledged, "
            f"{len(in_flight)} in flight at a kill, {reads} consistency reads"
        )
        assert bad_reads == [], f"inconsistent reads: {bad_reads[:3]}"

        with Environment.open(data) as env:
            ts = env.status().read_ts
            rows = env.select("t", as_of=ts, timeout=300).to_pylist()
            totals = env.select("totals", as_of=ts, timeout=300).to_pylist()
            ids = Counter(int(r["id"]) for r in rows)
            duplicated = [i for i, n in ids.items() if n > 1]
            assert duplicated == [], f"rows written twice: {duplicated[:10]}"
            lost = sorted((inserted - deleted) - set(ids) - in_flight)
            assert lost == [], f"acknowledged inserts lost: {lost[:10]}"
            resurrected = sorted((deleted & set(ids)) - in_flight)
            assert resurrected == [], f"acknowledged deletes undone: {resurrected[:10]}"
            unknown = sorted(set(ids) - inserted - in_flight)
            assert unknown == [], f"rows nobody acknowledged or attempted: {unknown[:10]}"
            assert view_rows(totals) == recompute(rows)
        deadline = time.monotonic() + 60
        while (left := processes_of(data)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left == [], f"processes left behind: {[p.pid for p in left]}"
    finally:
        for p in processes_of(data):
            kill_tree(p)
