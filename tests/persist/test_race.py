"""Racing writer processes on one shard: SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spate.clock import SystemClock
from spate.ids import ShardId, SystemIdGen
from spate.persist import PersistClient, PersistLocation
from spate.repr.arrow import table_to_updates
from spate.testing.process import spate_env
from tests.persist.conftest import DESC

REPO = Path(__file__).resolve().parents[2]
WRITERS = 4
ATTEMPTS = 200


def _race(location: PersistLocation, tmp_path: Path) -> None:
    shard = ShardId(uuid.uuid4())
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.persist._children",
                "race",
                "--blob",
                location.blob_uri,
                "--consensus",
                location.consensus_uri,
                "--shard",
                str(shard),
                "--attempts",
                str(ATTEMPTS),
                "--writer",
                str(i),
                "--go",
                str(go),
            ],
            cwd=REPO,
            env=spate_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WRITERS)
    ]
    time.sleep(0.5)
    go.touch()
    records = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        records += [json.loads(line) for line in out.splitlines()]
    assert len(records) == WRITERS * ATTEMPTS
    acks = [r for r in records if r["ack"]]
    losers = [r for r in records if not r["ack"]]
    # Exactly one winner per upper, and the winners' uppers are 0..n-1 with no gap.
    won = sorted(r["expected"] for r in acks)
    assert won == list(range(len(acks)))
    assert losers, "no contention happened; the race tested nothing"
    for r in losers:
        assert r["current"] and r["current"][0] > r["expected"]
    client = PersistClient(location, clock=SystemClock(), ids=SystemIdGen())
    try:
        state = client.fetch_state(shard)
        assert state.upper.elements == (len(acks),)
        reader = client.open_leased_reader(shard, DESC)
        with reader.live_batches(len(acks) - 1) as live:
            raw = [u for path in live.paths for u in table_to_updates(pq.read_table(path))]
        # Final contents: exactly the acknowledged rows, each once, at the upper it won.
        assert sorted((row[0], t, d) for row, t, d in raw) == sorted(
            (r["row"], r["expected"], 1) for r in acks
        )
    finally:
        client.close()


@pytest.mark.integration
def test_race_on_sqlite(tmp_path: Path) -> None:
    _race(PersistLocation.embedded(tmp_path / "data"), tmp_path)


@pytest.mark.integration
def test_race_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    table = f"race_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in postgres_url else "?"
    consensus = f"{postgres_url}{sep}table={table}&schema=spate_persist_tests"
    location = PersistLocation((tmp_path / "blob").as_uri(), consensus)
    try:
        _race(location, tmp_path)
    finally:
        from spate.persist.consensus_postgres import PostgresConsensus

        c = PostgresConsensus.from_uri(consensus)
        c.drop_table()
        c.close()
