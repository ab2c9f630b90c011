"""kill -9 at named crash points; after restart P1, P2 and P5 hold.

A child process appends numbered rows (and downgrades a reader, so compaction and GC run)
with one crash point armed; it kills itself with SIGKILL there. The test then, from another
process (this one):

* checks every blob the state references is present and intact (P5; GC deleted nothing
  referenced);
* checks every acknowledged row is there exactly once (P1);
* retries the in-flight write with its idempotency token: a no-op if it had committed, a
  commit otherwise — and afterwards every row is there exactly once (P2);
* once the dead writer's lease has run out, GC leaves exactly the referenced blobs.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from spate.clock import ManualClock
from spate.frontier.antichain import Antichain
from spate.ids import ShardId, SystemIdGen
from spate.persist import Appended, PersistClient, PersistLocation
from spate.repr.arrow import table_to_updates
from tests._crash_child import records_until_killed
from tests.persist.conftest import DESC, updates

WRITES = 12


def _run_child(location: PersistLocation, shard: ShardId, point: str) -> list[dict[str, object]]:
    return records_until_killed(
        [
            "tests.persist._children",
            "crash",
            "--blob",
            location.blob_uri,
            "--consensus",
            location.consensus_uri,
            "--shard",
            str(shard),
            "--writes",
            str(WRITES),
        ],
        point,
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    "point",
    [
        "persist.after_blob_set@4",
        "persist.before_cas@6",
        "persist.after_cas_before_ack@5",
        "persist.after_cas_before_ack@9",
        "gc.mid_physical_delete@1",
        "gc.mid_physical_delete@3",
        "gc.after_logical_delete@1",
        "gc.after_logical_delete@4",
    ],
)
def test_kill_at_crash_point_then_restart(tmp_path: Path, point: str) -> None:
    location = PersistLocation.embedded(tmp_path / "data")
    shard = ShardId(uuid.uuid4())
    log = _run_child(location, shard, point)
    acked = [int(r["ack"]) for r in log if "ack" in r]  # type: ignore[call-overload]
    attempts = {int(r["attempt"]): str(r["token"]) for r in log if "attempt" in r}  # type: ignore[call-overload]
    in_flight = [u for u in attempts if u not in acked]
    assert len(in_flight) <= 1
    clock = ManualClock(time.time_ns() // 1_000_000)
    client = PersistClient(location, clock=clock, ids=SystemIdGen())
    try:
        ctx = client._ctx(shard)
        state = client.fetch_state(shard)
        reader = client.open_leased_reader(shard, DESC)
        # P5 and GC safety: every referenced blob is present and intact.
        for b in state.batches:
            for p in b.parts:
                ctx.fetch_part(p, reader.schema)
        (upper,) = state.upper.elements

        def contents() -> Counter[int]:
            (u,) = client.fetch_state(shard).upper.elements
            snap = table_to_updates(reader.snapshot(u - 1, timeout=5)) if u else []
            return Counter(row[0] for row, _, d in snap for _ in range(d))

        # P1: every acknowledged write is there, once.
        got = contents()
        assert all(got[u] == 1 for u in acked)
        assert set(got) <= set(acked) | set(in_flight)
        # P2: retrying the in-flight write with its token never duplicates it.
        w = client.open_writer(shard, DESC)
        for u in in_flight:
            committed = upper > u
            res = w.compare_and_append(
                updates([((u, "row"), u, 1)]),
                expected_upper=Antichain.of(u),
                new_upper=Antichain.of(u + 1),
                idempotency_token=uuid.UUID(attempts[u]),
            )
            assert res == Appended(Antichain.of(u + 1), deduplicated=committed)
        got = contents()
        assert sorted(got) == sorted(set(acked) | set(in_flight))
        assert all(n == 1 for n in got.values())
        # The dead writer's lease runs out; GC then leaves exactly the referenced blobs.
        reader.expire()
        clock.advance(client.config.writer_lease_ms + 1)
        w.heartbeat()
        for _ in range(2):
            client.collect_garbage(shard)
        state = client.fetch_state(shard)
        referenced = {p.key for b in state.batches for p in b.parts}
        assert {k for k, _ in client.blob.list_keys(f"{shard}/")} == referenced
    finally:
        client.close()
