"""A whole client on an S3 blob store (moto on 127.0.0.1) with SQLite consensus."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from spate.clock import ManualClock
from spate.ids import SeededIdGen, ShardId
from spate.persist import PersistClient, PersistLocation
from spate.repr.arrow import table_to_updates
from tests.persist.conftest import DESC, A, make_s3_blob, tok, updates


def test_write_read_stage_and_collect_on_s3(moto_endpoint: str, tmp_path: Path) -> None:
    bucket = make_s3_blob(moto_endpoint).bucket  # type: ignore[attr-defined]
    location = PersistLocation(
        f"s3://{bucket}/spate?endpoint={moto_endpoint}&region=us-east-1",
        f"sqlite://{tmp_path / 'consensus.db'}",
    )
    client = PersistClient(location, clock=ManualClock(1), ids=SeededIdGen(5))
    shard = ShardId(uuid.uuid4())
    w = client.open_writer(shard, DESC)
    r = client.open_leased_reader(shard, DESC)
    for t in range(6):
        w.compare_and_append(
            updates(
                [((t % 3, f"v{t}"), t, 1), ((t % 3, f"v{t - 1}"), t, -1)]
                if t
                else [((0, "v0"), 0, 1)]
            ),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )
        r.downgrade_since(A(t))
    expected: dict[tuple[object, ...], int] = {}
    for t in range(6):
        expected[(t % 3, f"v{t}")] = expected.get((t % 3, f"v{t}"), 0) + 1
        if t:
            expected[(t % 3, f"v{t - 1}")] = expected.get((t % 3, f"v{t - 1}"), 0) - 1
    assert {row: d for row, _, d in table_to_updates(r.snapshot(5))} == {
        k: v for k, v in expected.items() if v
    }
    live = r.live_batches(5)
    assert live.staged_dir is not None and all(os.path.isfile(p) for p in live.paths)
    staged = sum(pq.read_table(p).num_rows for p in live.paths)
    assert staged == client.fetch_state(shard).num_updates
    r.downgrade_since(A(5))  # releases the staged copies
    assert not os.path.exists(live.staged_dir)
    state = client.fetch_state(shard)
    referenced = {p.key for b in state.batches for p in b.parts}
    client.collect_garbage(shard)
    assert {k for k, _ in client.blob.list_keys(f"{shard}/")} == referenced
    client.close()
