"""Helpers shared by the storage replica tests: in-memory persist, descriptions, oracles."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from spate.clock import ManualClock
from spate.ids import GlobalId, SeededIdGen, ShardId
from spate.persist.client import PersistClient
from spate.persist.location import PersistLocation
from spate.persist.read import ListenUpdates
from spate.protocol.storage_desc import (
    CollectionMetadata,
    IngestionDescription,
    LoadGenerator,
    LoadGeneratorSource,
    SourceExport,
)
from spate.repr.arrow import table_to_updates
from spate.repr.types import Row
from spate.storage.sources.open import load_generator, progress_desc


def persist_client(clock: ManualClock, seed: int = 0) -> PersistClient:
    return PersistClient(
        PersistLocation.memory(f"test-{uuid.uuid4().hex}"), clock=clock, ids=SeededIdGen(seed)
    )


def shard(ids: SeededIdGen) -> ShardId:
    return ShardId.new(ids)


def loadgen_ingestion(
    source: LoadGeneratorSource, ids: SeededIdGen, *, first_id: int = 1
) -> tuple[GlobalId, IngestionDescription]:
    """An ingestion of every output of a load generator; the remap collection is its own id."""
    reader = load_generator(source)
    ingestion = GlobalId.user(first_id)
    exports = tuple(
        SourceExport(GlobalId.user(first_id + 1 + i), name, shard(ids), desc)
        for i, (name, desc) in enumerate(reader.outputs.items())
    )
    remap = CollectionMetadata(ingestion, shard(ids), progress_desc(source))
    return ingestion, IngestionDescription(source, exports, remap)


def hold_all(client: PersistClient, description: IngestionDescription) -> list[Any]:
    """Leased readers at since 0 on every shard: the whole history stays readable (the
    controller's read holds play this part in a deployment)."""
    remap = description.remap
    handles = [client.open_leased_reader(remap.shard, remap.desc)]
    handles += [client.open_leased_reader(e.shard, e.desc) for e in description.exports]
    return handles


def counter(**kw: Any) -> LoadGeneratorSource:
    return LoadGeneratorSource(LoadGenerator.COUNTER, **kw)


def contents_at(client: PersistClient, shard_id: ShardId, desc: Any, time: int) -> Counter[Row]:
    reader = client.open_leased_reader(shard_id, desc)
    try:
        out: Counter[Row] = Counter()
        for row, _t, diff in table_to_updates(reader.snapshot(time)):
            out[row] += diff
        return out
    finally:
        reader.expire()


def all_updates(client: PersistClient, shard_id: ShardId, desc: Any) -> list[tuple[Row, int, int]]:
    """Every update of a shard whose since is still 0 (snapshot at 0, then a listen)."""
    reader = client.open_leased_reader(shard_id, desc)
    try:
        upper = client.fetch_state(shard_id).upper
        out = table_to_updates(reader.snapshot(0))
        listener = reader.listener(0)
        while listener.frontier.less_than(upper):
            for e in listener.poll(timeout=5):
                if isinstance(e, ListenUpdates):
                    out.extend(table_to_updates(e.updates))
        return out
    finally:
        reader.expire()


def remap_history(
    client: PersistClient, description: IngestionDescription
) -> list[tuple[int, Any]]:
    """``(time, point)`` of every binding, read independently from the remap shard."""
    remap = description.remap
    source_reader = load_generator(description.connection)  # type: ignore[arg-type]
    reader = client.open_leased_reader(remap.shard, remap.desc)
    try:
        upper = client.fetch_state(remap.shard).upper.as_option()
        assert upper is not None
        tables = [reader.snapshot(0)]
        listener = reader.listener(0)
        while listener.frontier.less_than(client.fetch_state(remap.shard).upper):
            for e in listener.poll(timeout=5):
                if isinstance(e, ListenUpdates):
                    tables.append(e.updates)
        by_time: dict[int, list[tuple[Row, int]]] = {}
        for t in tables:
            for row, time, diff in table_to_updates(t):
                by_time.setdefault(time, []).append((row, diff))
        acc: Counter[Row] = Counter()
        out = []
        for time in sorted(by_time):
            for row, diff in by_time[time]:
                acc[row] += diff
            out.append((time, source_reader.point_from_rows(list(+acc))))
        return out
    finally:
        reader.expire()


def expected_at(source: LoadGeneratorSource, reference: str, point: int) -> Counter[Row]:
    out: Counter[Row] = Counter()
    table = load_generator(source).replay(0, point).updates.get(reference)
    if table is not None:
        for row in table.to_pylist():
            diff = row.pop("_diff")
            out[tuple(row.values())] += diff
    return +out
