"""An UPSERT Kafka source's ingestion across crashes: each new runner (a restarted storage
replica) restores the source's key state from its exports in persist, never re-reading the
topic, and the exports end equal to a recomputation over every record, each row once."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from spate.clock import ManualClock
from spate.ids import GlobalId, SeededIdGen
from spate.protocol.kafka import KafkaEnvelope, KafkaFormat, KafkaSource, kafka_client_settings
from spate.protocol.storage_desc import CollectionMetadata, IngestionDescription, SourceExport
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.sources.kafka.envelope import DATA, ERRORS, outputs
from spate.storage.sources.kafka.reader import KAFKA_PROGRESS_DESC, KafkaReader
from spate.testing.kafka import mock_cluster
from tests.storage.replica._setup import contents_at, hold_all, persist_client, shard
from tests.storage.sources.kafka.test_upsert_state import (
    _produce,
    _recompute,
    _records,
    _topic,
)


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def brokers() -> Iterator[str]:
    with mock_cluster() as bootstrap:
        yield bootstrap


def test_restarts_restore_the_key_state_from_the_exports(brokers: str) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    topic = _topic()
    source = KafkaSource(
        kafka_client_settings(brokers),
        topic,
        KafkaFormat.TEXT,
        key_format=KafkaFormat.JSON,
        envelope=KafkaEnvelope.UPSERT,
    )
    clock = ManualClock(1_000_000)
    client = persist_client(clock)
    ids = SeededIdGen(seed)
    ingestion = GlobalId.user(1)
    exports = tuple(
        SourceExport(GlobalId.user(2 + i), name, shard(ids), desc)
        for i, (name, desc) in enumerate(outputs(source).items())
    )
    description = IngestionDescription(
        source, exports, CollectionMetadata(ingestion, shard(ids), KAFKA_PROGRESS_DESC)
    )
    hold_all(client, description)
    readers: list[KafkaReader] = []

    def start(n: int) -> IngestionRunner:
        reader = KafkaReader(source, max_records_per_poll=30, poll_budget_s=0.05)
        readers.append(reader)
        return IngestionRunner(
            ingestion, description, reader=reader, persist=client, clock=clock, ids=ids
        )

    produced: list[tuple[bytes | None, bytes | None]] = []
    r = start(0)
    crashes = 0
    original = IngestionRunner._append
    for round_ in range(6):
        batch = _records(rng, 120, 40)
        _produce(brokers, topic, batch)
        produced += batch
        for step in range(rng.randint(1, 4)):
            clock.advance(rng.choice([1, 50, 250]))
            if rng.random() < 0.5:
                # Crash after the binding, with some exports written: a new process.
                budget = [rng.randint(0, len(exports) - 1)]

                def failing(self: IngestionRunner, *args: Any, _n: list[int] = budget) -> None:
                    if _n[0] == 0:
                        raise Crash
                    _n[0] -= 1
                    original(self, *args)

                IngestionRunner._append = failing  # type: ignore[method-assign]
                try:
                    r.step()
                except Crash:
                    crashes += 1
                finally:
                    IngestionRunner._append = original  # type: ignore[method-assign]
                r = start(round_ * 10 + step)
            else:
                r.step()
    # Catch up with everything produced.
    for _ in range(400):
        clock.advance(50)
        r.step()
        if r.statistics()[0].offset_committed == len(produced):
            break
    assert r.statistics()[0].offset_committed == len(produced)
    upper = r.uppers()[ingestion].as_option()
    assert upper is not None
    want_data, want_errors = _recompute(source, produced)
    by_name = {e.reference: e for e in exports}
    data = contents_at(client, by_name[DATA].shard, by_name[DATA].desc, upper - 1)
    errors = contents_at(client, by_name[ERRORS].shard, by_name[ERRORS].desc, upper - 1)
    assert +data == want_data
    assert all(n == 1 for n in (+errors).values())
    assert {row[:3] for row in +errors} == want_errors
    assert sum(x.records_reread for x in readers) == 0  # restored from persist every time
    assert len(readers) > 1
    print(f"crashes={crashes} restarts={len(readers) - 1}")
    r.close()
    for x in readers:
        x.close()
