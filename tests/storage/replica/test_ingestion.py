"""Reclocking: exports equal the source at every bound time, across crashes and lost races."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from spate.clock import ManualClock
from spate.ids import SeededIdGen
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.sources.open import load_generator
from spate.storage.sources.source import SourceError
from tests.storage.replica._setup import (
    all_updates,
    contents_at,
    counter,
    hold_all,
    loadgen_ingestion,
    persist_client,
    remap_history,
)


class Crash(Exception):
    pass


def check_exports(client: Any, description: Any) -> int:
    """Every export equals the source at every binding time; returns the number checked."""
    history = remap_history(client, description)
    assert history, "no bindings"
    source = load_generator(description.connection)
    chunks = []
    previous = 0
    for _time, point in history:
        chunks.append(source.replay(previous, point).updates)
        previous = point
    checked = 0
    for e in description.exports:
        updates = sorted(all_updates(client, e.shard, e.desc), key=lambda u: u[1])
        got: Counter[Any] = Counter()
        want: Counter[Any] = Counter()
        i = 0
        for (time, point), updates_of in zip(history, chunks, strict=True):
            while i < len(updates) and updates[i][1] <= time:
                got[updates[i][0]] += updates[i][2]
                i += 1
            chunk = updates_of.get(e.reference)
            for row in [] if chunk is None else chunk.to_pylist():
                diff = row.pop("_diff")
                want[tuple(row.values())] += diff
            assert +got == +want, f"export {e.id} ({e.reference}) at {time} (point {point})"
            assert all(n == 1 for n in (+got).values())
            checked += 1
        assert i == len(updates), f"export {e.id} has updates after the last binding"
    return checked


def runner(
    client: Any, ingestion: Any, description: Any, clock: ManualClock, seed: int
) -> IngestionRunner:
    return IngestionRunner(
        ingestion,
        description,
        reader=load_generator(description.connection),
        persist=client,
        clock=clock,
        ids=SeededIdGen(seed),
    )


@pytest.mark.parametrize(
    "source",
    [
        counter(tick_interval_ms=100, rows_per_tick=3, max_cardinality=10),
        LoadGeneratorSource(LoadGenerator.AUCTION, seed=4, tick_interval_ms=100, rows_per_tick=40),
        LoadGeneratorSource(
            LoadGenerator.TPCH, scale_factor=0.0005, tick_interval_ms=100, rows_per_tick=5
        ),
    ],
    ids=["counter", "auction", "tpch"],
)
def test_crashes_at_random_points_never_duplicate_or_skip(source: Any, seed: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock(1_000_000)
    client = persist_client(clock)
    ids = SeededIdGen(seed)
    ingestion, description = loadgen_ingestion(source, ids)
    hold_all(client, description)
    r = runner(client, ingestion, description, clock, seed)
    crashes = 0
    for step in range(40):
        clock.advance(rng.choice([1, 50, 100, 250]))
        if rng.random() < 0.2:
            # Crash in the middle of writing the exports (after the binding committed).
            calls = rng.randint(0, len(description.exports) - 1)
            original = IngestionRunner._append

            budget = [calls]

            def failing(
                self: IngestionRunner, *args: Any, _n: list[int] = budget, _f: Any = original
            ) -> None:
                if _n[0] == 0:
                    raise Crash
                _n[0] -= 1
                _f(self, *args)

            IngestionRunner._append = failing  # type: ignore[method-assign]
            try:
                r.step()  # a step without new data writes no export batch: no crash
            except Crash:
                crashes += 1
            finally:
                IngestionRunner._append = original  # type: ignore[method-assign]
            # A new process: fresh handles, fresh reader, same shards.
            r = runner(client, ingestion, description, clock, seed + step + 1)
        else:
            r.step()
    r.step()
    uppers = r.uppers()
    assert len(set(uppers.values())) == 1, uppers  # every collection caught up
    assert check_exports(client, description) > 0
    print(f"crashes={crashes}")


def test_two_runners_race_and_stay_exact(seed: int) -> None:
    clock = ManualClock(5_000)
    client = persist_client(clock)
    ids = SeededIdGen(seed)
    ingestion, description = loadgen_ingestion(counter(tick_interval_ms=10, rows_per_tick=2), ids)
    hold_all(client, description)
    a = runner(client, ingestion, description, clock, 1)
    b = runner(client, ingestion, description, clock, 2)
    rng = random.Random(seed)
    for _ in range(30):
        clock.advance(rng.randint(1, 30))
        rng.choice([a, b]).step()
    a.step()
    b.step()
    assert check_exports(client, description) > 0


def test_restart_resumes_at_the_upper(seed: int) -> None:
    clock = ManualClock(10_000)
    client = persist_client(clock)
    ids = SeededIdGen(seed)
    source = counter(tick_interval_ms=100, rows_per_tick=1)
    ingestion, description = loadgen_ingestion(source, ids)
    hold_all(client, description)
    r = runner(client, ingestion, description, clock, 1)
    for _ in range(5):
        clock.advance(100)
        r.step()
    before = r.uppers()
    r.close()
    r2 = runner(client, ingestion, description, clock, 2)
    assert r2.read_uppers() == before  # reads, without writing
    r2.rehydrate()
    assert r2.uppers() == before
    clock.advance(100)
    r2.step()
    export = description.exports[0]
    last_time = r2.uppers()[export.id].as_option() - 1  # type: ignore[operator]
    got = contents_at(client, export.shard, export.desc, last_time)
    assert got == {(i,): 1 for i in range(1, 7)}  # the restart re-emits nothing, skips nothing
    stats = {s.id: s for s in r2.statistics()}
    assert stats[ingestion].offset_committed == 6


def test_remap_schema_must_match_the_source() -> None:
    import dataclasses

    from spate.repr.desc import RelationDesc
    from spate.repr.types import TEXT

    ids = SeededIdGen(1)
    ingestion, description = loadgen_ingestion(counter(), ids)
    bad = dataclasses.replace(
        description,
        remap=dataclasses.replace(description.remap, desc=RelationDesc.of(("x", TEXT))),
    )
    clock = ManualClock(0)
    with pytest.raises(SourceError, match="records its progress as"):
        runner(persist_client(clock), ingestion, bad, clock, 1)
