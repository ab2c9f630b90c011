"""Corrupt batches are always detected and never served."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.ids import ShardId
from spate.persist import BatchNotFromThisShard, CorruptBatch, PersistClient
from spate.persist.batch import COMPRESS_MIN_BYTES, decode_part, encode_part, make_part
from spate.persist.state import BatchPart
from spate.repr.arrow import updates_schema
from tests.persist.conftest import DESC, A, tok, updates


def _fill(client: PersistClient, shard: ShardId, rng: random.Random, n: int) -> None:
    w = client.open_writer(shard, DESC)
    for t in range(n):
        rows = [
            ((rng.randrange(10**6), f"v{rng.randrange(10**4)}"), t, rng.choice((1, -1, 2)))
            for _ in range(rng.randrange(1, 300))
        ]
        w.compare_and_append(
            updates(rows), expected_upper=A(t), new_upper=A(t + 1), idempotency_token=tok()
        )
    client.wait_for_maintenance()  # the parts listed below stay in the state


def _parts(client: PersistClient, shard: ShardId) -> list[BatchPart]:
    return [p for b in client.fetch_state(shard).batches for p in b.parts]


def test_200_random_corruptions_are_all_detected(client: PersistClient, seed: int) -> None:
    rng = random.Random(seed)
    ours, theirs = ShardId(uuid.uuid4()), ShardId(uuid.uuid4())
    for s in (ours, theirs):
        _fill(client, s, rng, 6)
    schema = client.open_leased_reader(ours, DESC).schema
    mine = _parts(client, ours)
    foreign = _parts(client, theirs)
    counts = {"truncate": 0, "flip": 0, "zero_header": 0, "swap": 0}
    for _ in range(200):
        part = rng.choice(mine)
        data = client.blob.get(part.key)
        assert data is not None
        # Sanity: the intact blob decodes.
        assert decode_part(data, part, ours, schema).num_rows == part.num_updates
        mode = rng.choice(list(counts))
        counts[mode] += 1
        if mode == "truncate":
            bad = data[: rng.randrange(len(data))]
        elif mode == "flip":
            i = rng.randrange(len(data))
            bad = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
        elif mode == "zero_header":
            n = rng.randrange(4, 65)
            bad = bytes(n) + data[n:]
        else:
            other = client.blob.get(rng.choice(foreign).key)
            assert other is not None
            bad = other
        with pytest.raises(CorruptBatch) as e:
            decode_part(bad, part, ours, schema)
        assert part.key in str(e.value)
        if mode == "swap":
            assert isinstance(e.value, BatchNotFromThisShard)
            assert str(theirs) in str(e.value)
    print(f"corruptions: {counts}")
    assert all(counts.values())


def test_a_corrupt_file_on_disk_fails_every_read_path(
    client: PersistClient, tmp_path: Path
) -> None:
    shard = ShardId(uuid.uuid4())
    w = client.open_writer(shard, DESC)
    w.compare_and_append(
        updates([((1, "a"), 0, 1)]), expected_upper=A(0), new_upper=A(1), idempotency_token=tok()
    )
    w.compare_and_append(
        updates([((2, "b"), 1, 1)]), expected_upper=A(1), new_upper=A(2), idempotency_token=tok()
    )
    client.wait_for_maintenance()  # compaction done: the part corrupted below stays live
    r = client.open_leased_reader(shard, DESC)
    part = _parts(client, shard)[-1]
    path = Path(str(client.blob.local_path(part.key)))
    data = bytearray(path.read_bytes())
    data[8] ^= 0x10  # inside the first data page
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptBatch, match="checksum"):
        r.snapshot(1)
    with pytest.raises(CorruptBatch):
        r.live_batches(1)

    async def listen() -> None:
        async for _ in r.listen(0):
            pass

    with pytest.raises(CorruptBatch):
        asyncio.run(asyncio.wait_for(listen(), 10))
    path.unlink()
    with pytest.raises(CorruptBatch, match="missing"):
        r.snapshot(1)


def test_small_parts_are_written_plain_and_large_ones_with_zstd() -> None:
    """A small part: uncompressed, no dictionary, no statistics; a large one: zstd, with
    both. Each reads back the same."""
    shard = ShardId(uuid.uuid4())
    schema = updates_schema(DESC)
    big = COMPRESS_MIN_BYTES // 32  # ~36 bytes an update: past the threshold
    for rows, codec, full in (
        ([((1, "a"), 3, 1), ((1, "a"), 3, 1)], "UNCOMPRESSED", False),
        ([((i, "x" * 8), 3, 1) for i in range(big)], "ZSTD", True),
    ):
        table = updates(rows).cast(schema)
        data = encode_part(table, shard)
        meta = pq.read_metadata(pa.BufferReader(data))
        for i in range(meta.num_columns):
            column = meta.row_group(0).column(i)
            assert column.compression == codec
            assert column.is_stats_set == full
            assert ("RLE_DICTIONARY" in column.encodings) == full
        part = make_part("k", data, table.num_rows)
        assert decode_part(data, part, shard, schema).equals(table)
