"""The Kafka sink against a Tansu broker process: each interval in one transaction with its
progress; a reopened sink resumes at its committed frontier, skips what it already wrote and
fences the writer it replaces; read_committed consumers see every record once. And the
encoding of UPSERT and DEBEZIUM records (no broker)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Consumer

from spate.errors import SinkError
from spate.frontier.antichain import Antichain
from spate.protocol.kafka import KafkaSinkConnection, KafkaSinkEnvelope, kafka_client_settings
from spate.repr.arrow import updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT
from spate.storage.sinks.kafka.encode import Encoder
from spate.storage.sinks.kafka.sink import KafkaSink
from spate.testing.kafka import TansuBroker, read_committed
from tests._tansu import running_tansu

DESC = RelationDesc.of(("id", INT64, False), ("v", TEXT))


def _ups(*ups: tuple[int, str, int, int]) -> pa.Table:
    return updates_to_table(DESC, [((i, v), t, d) for i, v, t, d in ups])


def test_upsert_and_debezium_encoding() -> None:
    table = _ups((1, "a", 5, 1), (2, "b", 5, 1), (1, "a", 6, -1), (1, "c", 6, 1), (2, "b", 7, -1))
    upsert = Encoder(DESC, KafkaSinkEnvelope.UPSERT, ["id"]).records(table)
    assert [(k, v and json.loads(v)) for k, v in upsert] == [
        (b'{"id":1}', {"id": 1, "v": "a"}),
        (b'{"id":2}', {"id": 2, "v": "b"}),
        (b'{"id":1}', {"id": 1, "v": "c"}),
        (b'{"id":2}', None),
    ]
    deb = Encoder(DESC, KafkaSinkEnvelope.DEBEZIUM, ["id"]).records(table)
    assert [json.loads(v or b"") for _, v in deb][2:] == [
        {"before": {"id": 1, "v": "a"}, "after": {"id": 1, "v": "c"}},
        {"before": {"id": 2, "v": "b"}, "after": None},
    ]
    keyless = Encoder(DESC, KafkaSinkEnvelope.DEBEZIUM, []).records(_ups((1, "a", 1, 2)))
    assert [k for k, _ in keyless] == [None, None]
    with pytest.raises(ValueError, match="nope"):
        Encoder(DESC, KafkaSinkEnvelope.UPSERT, ["nope"])


@pytest.fixture(scope="module")
def broker() -> Iterator[TansuBroker]:
    yield from running_tansu()


def test_intervals_commit_once_across_reopen_and_fence(broker: TansuBroker) -> None:
    topic = f"out{random.randrange(1 << 30):x}"
    conn = KafkaSinkConnection(
        kafka_client_settings(broker.bootstrap), topic, KafkaSinkEnvelope.UPSERT, ("id",)
    )
    a = KafkaSink(conn, DESC, sink="u1", progress_key=f"u1/{topic}")
    assert a.upper == Antichain.minimum()
    a.write(_ups((1, "a", 0, 1)), lower=Antichain.of(0), upper=Antichain.of(3))
    a.write(_ups((2, "b", 3, 1)), lower=Antichain.of(3), upper=Antichain.of(5))
    # A new incarnation resumes at 5 and fences the old one.
    b = KafkaSink(conn, DESC, sink="u1", progress_key=f"u1/{topic}")
    assert b.upper == Antichain.of(5)
    b.write(_ups((2, "b", 3, 1)), lower=Antichain.of(3), upper=Antichain.of(5))  # a replay: skipped
    with pytest.raises(SinkError):
        b.write(_ups((9, "x", 7, 1)), lower=Antichain.of(7), upper=Antichain.of(8))  # a gap
    with pytest.raises(SinkError):
        a.write(_ups((3, "zombie", 5, 1)), lower=Antichain.of(5), upper=Antichain.of(6))
    b.write(_ups((1, "a", 5, -1), (3, "c", 5, 1)), lower=Antichain.of(5), upper=Antichain.of(6))
    records = [(k, v and json.loads(v)) for k, v in read_committed(broker.bootstrap, topic)]
    assert records == [
        (b'{"id":1}', {"id": 1, "v": "a"}),
        (b'{"id":2}', {"id": 2, "v": "b"}),
        (b'{"id":1}', None),
        (b'{"id":3}', {"id": 3, "v": "c"}),
    ]
    b.close()
    a.close()


class _StaleWatermarks:
    """A consumer whose high watermarks are stale (as a broker may answer before a fetch)."""

    def __init__(self, inner: Consumer) -> None:
        self._inner = inner

    def get_watermark_offsets(self, *args: object, **kwargs: object) -> tuple[int, int]:
        return (0, 0)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_a_stale_high_watermark_does_not_hide_progress(
    broker: TansuBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spate.storage.sources.kafka import client

    topic = f"out{random.randrange(1 << 30):x}"
    conn = KafkaSinkConnection(
        kafka_client_settings(broker.bootstrap), topic, KafkaSinkEnvelope.DEBEZIUM
    )
    a = KafkaSink(conn, DESC, sink="u1", progress_key=f"u1/{topic}")
    for t in range(5):
        a.write(_ups((t, "x", t, 1)), lower=Antichain.of(t), upper=Antichain.of(t + 1))
    a.close()
    real = client.consumer
    monkeypatch.setattr(client, "consumer", lambda *a, **k: _StaleWatermarks(real(*a, **k)))
    b = KafkaSink(conn, DESC, sink="u1", progress_key=f"u1/{topic}")
    assert b.upper == Antichain.of(5)
    b.close()


def test_an_interval_larger_than_the_producer_queue_commits(broker: TansuBroker) -> None:
    """The interval's records and then its progress record wait for room in a full queue."""
    topic = f"out{random.randrange(1 << 30):x}"
    conn = KafkaSinkConnection(
        kafka_client_settings(broker.bootstrap), topic, KafkaSinkEnvelope.UPSERT, ("id",)
    )
    a = KafkaSink(
        conn,
        DESC,
        sink="u1",
        progress_key=f"u1/{topic}",
        producer_settings={"queue.buffering.max.messages": 50},
    )
    a.write(
        _ups(*[(i, "v", 0, 1) for i in range(50)]), lower=Antichain.of(0), upper=Antichain.of(1)
    )
    assert a.upper == Antichain.of(1)
    assert len(read_committed(broker.bootstrap, topic)) == 50
    a.close()
