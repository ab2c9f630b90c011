"""The Kafka source's reader against librdkafka's mock cluster: formats, envelopes, errors,
and that a replay of ``[lower, upper)`` (a restart) derives exactly what the poll derived."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from spate.protocol.kafka import KafkaEnvelope, KafkaFormat, KafkaSource, kafka_client_settings
from spate.repr.arrow import table_to_rows
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import INT64, TEXT
from spate.storage.sources.kafka.reader import KafkaPoint, KafkaReader
from spate.testing.kafka import mock_cluster


@pytest.fixture(scope="module")
def brokers() -> Iterator[str]:
    with mock_cluster() as bootstrap:
        yield bootstrap


def _produce(brokers: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": brokers, "linger.ms": 5})
    for key, value in records:
        p.produce(topic, key=key, value=value)
    assert p.flush(30) == 0


def _topic() -> str:
    return f"t{random.randrange(1 << 40):x}"


def _drain(
    reader: KafkaReader, lower: KafkaPoint, want: int
) -> list[tuple[KafkaPoint, KafkaPoint, dict[str, Counter[tuple[object, ...]]]]]:
    """Poll until ``want`` records are read; the chunks as (lower, upper, updates)."""
    chunks = []
    read = 0
    deadline = time.monotonic() + 30
    while read < want:
        assert time.monotonic() < deadline, f"read {read} of {want}"
        chunk = reader.poll(lower, now_millis=int(time.time() * 1000))
        if chunk is None:
            continue
        read += sum(o for _, o in chunk.upper) - sum(o for _, o in lower)
        chunks.append((lower, chunk.upper, _counts(chunk.updates)))
        lower = chunk.upper
    return chunks


def _counts(updates: object) -> dict[str, Counter[tuple[object, ...]]]:
    out: dict[str, Counter[tuple[object, ...]]] = {}
    assert isinstance(updates, dict)
    for name, table in updates.items():
        c: Counter[tuple[object, ...]] = Counter()
        cols = [n for n in table.column_names if n != DIFF_COLUMN]
        for row, d in zip(
            table_to_rows(table, cols), table.column(DIFF_COLUMN).to_pylist(), strict=True
        ):
            c[row] += d
        out[name] = Counter({k: v for k, v in c.items() if v})
    return out


def _total(
    chunks: list[tuple[KafkaPoint, KafkaPoint, dict[str, Counter[tuple[object, ...]]]]], name: str
) -> Counter[tuple[object, ...]]:
    total: Counter[tuple[object, ...]] = Counter()
    for _, _, ups in chunks:
        total.update(ups.get(name, Counter()))
    return Counter({k: v for k, v in total.items() if v})


def _id_name_source(brokers: str, topic: str) -> KafkaSource:
    """A JSON source of ``topic`` with columns ``id`` and ``name``, and its records' partition
    and offset."""
    return KafkaSource(
        kafka_client_settings(brokers),
        topic,
        KafkaFormat.JSON,
        value_desc=RelationDesc.of(("id", INT64, False), ("name", TEXT)),
        include=("partition", "offset"),
    )


def test_json_none_envelope_with_metadata_and_errors(brokers: str) -> None:
    topic = _topic()
    good = [(None, json.dumps({"id": i, "name": f"n{i}"}).encode()) for i in range(200)]
    bad = [(None, b"{not json"), (None, b'{"id": "x"}')]
    _produce(brokers, topic, good + bad)
    source = _id_name_source(brokers, topic)
    reader = KafkaReader(source)
    assert [c.name for c in reader.outputs["data"].columns] == ["id", "name", "partition", "offset"]
    chunks = _drain(reader, (), 202)
    data = _total(chunks, "data")
    assert sorted(r[0] for r in data) == list(range(200))
    errors = _total(chunks, "errors")
    assert len(errors) == 2 and all(v == 1 for v in errors.values())
    assert any("not JSON" in str(r[3]) for r in errors)
    # A restart replays every chunk from its bounds: the same updates, chunk by chunk.
    fresh = KafkaReader(source)
    for lower, upper, ups in chunks:
        assert _counts(fresh.replay(lower, upper).updates) == ups
    reader.close()
    fresh.close()


def test_upsert_key_holds_its_error_until_a_good_value(brokers: str) -> None:
    topic = _topic()
    source = KafkaSource(
        kafka_client_settings(brokers),
        topic,
        KafkaFormat.TEXT,
        key_format=KafkaFormat.TEXT,
        envelope=KafkaEnvelope.UPSERT,
    )
    p = Producer({"bootstrap.servers": brokers})
    # All in partition 0 so the order is the produce order.
    for key, value in [(b"a", b"1"), (b"b", b"2"), (b"a", b"\xff"), (b"b", None), (None, b"x")]:
        p.produce(topic, key=key, value=value, partition=0)
    p.flush(30)
    reader = KafkaReader(source)
    chunks = _drain(reader, (), 5)
    assert _total(chunks, "data") == Counter()
    errors = _total(chunks, "errors")
    found = [(r[2] or b"", "UTF-8" in str(r[3]) or "no key" in str(r[3])) for r in errors]
    assert sorted(found) == [(b"", True), (b"a", True)]
    lower = chunks[-1][1]
    p.produce(topic, key=b"a", value=b"3", partition=0)
    p.flush(30)
    more = _drain(reader, lower, 1)
    assert _total(chunks + more, "data") == Counter({("a", "3"): 1})
    assert [r[2] for r in _total(chunks + more, "errors")] == [None]
    # A new reader replaying only the last chunk rebuilds the state first.
    fresh = KafkaReader(source)
    assert _counts(fresh.replay(more[0][0], more[0][1]).updates) == more[0][2]
    reader.close()
    fresh.close()


def test_debezium_before_after(brokers: str) -> None:
    topic = _topic()
    desc = RelationDesc.of(("id", INT64, False), ("v", TEXT))

    def ev(before: dict[str, object] | None, after: dict[str, object] | None) -> bytes:
        return json.dumps({"payload": {"before": before, "after": after}}).encode()

    _produce(
        brokers,
        topic,
        [
            (b"1", ev(None, {"id": 1, "v": "a"})),
            (b"2", ev(None, {"id": 2, "v": "b"})),
            (b"1", ev({"id": 1, "v": "a"}, {"id": 1, "v": "c"})),
            (b"2", ev({"id": 2, "v": "b"}, None)),
            (b"2", None),
        ],
    )
    source = KafkaSource(
        kafka_client_settings(brokers),
        topic,
        KafkaFormat.JSON,
        value_desc=desc,
        envelope=KafkaEnvelope.DEBEZIUM,
    )
    reader = KafkaReader(source)
    chunks = _drain(reader, (), 5)
    assert _total(chunks, "data") == Counter({(1, "c"): 1})
    reader.close()


def test_text_bytes_csv_and_headers(brokers: str) -> None:
    topic = _topic()
    p = Producer({"bootstrap.servers": brokers})
    p.produce(topic, value=b"a,b,c", partition=1, headers=[("h", b"v")], timestamp=86_400_000)
    p.produce(topic, value=b'"x,y",,z', partition=1)
    p.produce(topic, value=b"only,two", partition=1)
    p.flush(30)
    source = KafkaSource(
        kafka_client_settings(brokers),
        topic,
        KafkaFormat.CSV,
        value_csv_columns=3,
        include=("headers", "timestamp"),
    )
    reader = KafkaReader(source)
    chunks = _drain(reader, (), 3)
    rows = sorted(_total(chunks, "data"))
    assert [r[:3] for r in rows] == [("a", "b", "c"), ("x,y", "", "z")]
    assert rows[0][3] == '[["h","v"]]' and str(rows[0][4]) == "1970-01-02 00:00:00"
    assert len(_total(chunks, "errors")) == 1
    reader.close()


def test_a_batch_decoded_poll_is_the_replay_row_for_row(brokers: str) -> None:
    """Declared-JSON values decoded batch by batch while polling, over three partitions, give
    the very table a replay of the chunk's bounds gives (in ``(partition, offset)`` order); a
    value the batch decoder leaves sends its chunk record by record without losing a row."""
    topic = _topic()
    p = Producer({"bootstrap.servers": brokers, "linger.ms": 5})
    for i in range(900):
        value = json.dumps({"id": i, "name": f"n{i}"}).encode()
        p.produce(topic, value=b'{"id": NaN}' if i == 700 else value, partition=i % 3)
    assert p.flush(30) == 0
    source = _id_name_source(brokers, topic)
    reader = KafkaReader(source, max_records_per_poll=250)
    fresh = KafkaReader(source)
    lower: KafkaPoint = ()
    read = errors = 0
    deadline = time.monotonic() + 30
    while read < 900:
        assert time.monotonic() < deadline, f"read {read} of 900"
        chunk = reader.poll(lower, now_millis=int(time.time() * 1000))
        if chunk is None:
            continue
        polled = chunk.updates["data"]
        columns = (polled.column("partition").to_pylist(), polled.column("offset").to_pylist())
        keys = list(zip(*columns, strict=True))
        assert keys == sorted(keys)
        replayed = fresh.replay(lower, chunk.upper).updates
        assert polled.equals(replayed["data"])
        assert _counts(chunk.updates) == _counts(replayed)
        errors += chunk.updates["errors"].num_rows if "errors" in chunk.updates else 0
        read += sum(o for _, o in chunk.upper) - sum(o for _, o in lower)
        lower = chunk.upper
    assert errors == 1
    reader.close()
    fresh.close()


def test_start_offset_and_a_point_resumes_exactly(brokers: str) -> None:
    topic = _topic()
    p = Producer({"bootstrap.servers": brokers})
    for i in range(10):
        p.produce(topic, value=str(i).encode(), partition=0)
    p.flush(30)
    source = KafkaSource(
        kafka_client_settings(brokers), topic, KafkaFormat.TEXT, start_offsets=(4,)
    )
    reader = KafkaReader(source)
    chunks = _drain(reader, (), 6)
    assert sorted(r[0] for r in _total(chunks, "data")) == [str(i) for i in range(4, 10)]
    upper = chunks[-1][1]
    assert dict(upper)[0] == 10
    assert reader.point_from_rows(reader.progress_rows(upper)) == upper
    reader.close()
    # Resuming from the point reads only what came after it.
    for i in range(10, 13):
        p.produce(topic, value=str(i).encode(), partition=0)
    p.flush(30)
    again = KafkaReader(source)
    more = _drain(again, upper, 3)
    assert sorted(r[0] for r in _total(more, "data")) == ["10", "11", "12"]
    again.close()


class _Growing(KafkaReader):
    """Sees only partition 0 until ``grown``: a topic that gains partitions."""

    grown = False

    def _discover(self, consumer: Consumer) -> tuple[int, ...]:
        found = super()._discover(consumer)
        return found if self.grown else found[:1]


def test_new_partitions_are_read_from_their_start(brokers: str) -> None:
    topic = _topic()
    p = Producer({"bootstrap.servers": brokers})
    for i in range(6):
        p.produce(topic, value=str(i).encode(), partition=0 if i < 3 else 2)
    p.flush(30)
    source = KafkaSource(kafka_client_settings(brokers), topic, KafkaFormat.TEXT)
    reader = _Growing(source, discovery_interval_ms=0)
    first = _drain(reader, (), 3)
    assert sorted(r[0] for r in _total(first, "data")) == ["0", "1", "2"]
    lower = first[-1][1]
    assert dict(lower) == {0: 3}
    reader.grown = True
    more = _drain(reader, lower, 3)
    assert sorted(r[0] for r in _total(more, "data")) == ["3", "4", "5"]
    assert dict(more[-1][1]) == {0: 3, 2: 3}
    reader.close()


def test_avro_values_with_a_given_schema(brokers: str) -> None:
    import io

    import fastavro

    schema = {
        "type": "record",
        "name": "click",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["null", "string"]},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        ],
    }
    parsed = fastavro.parse_schema(schema)

    def avro(record: dict[str, object]) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        return buf.getvalue()

    topic = _topic()
    _produce(
        brokers,
        topic,
        [
            (None, avro({"id": 1, "name": "a", "at": 86_400_000})),
            (None, avro({"id": 2, "name": None, "at": 0})),
            (None, b"\x01"),
        ],
    )
    source = KafkaSource(
        kafka_client_settings(brokers),
        topic,
        KafkaFormat.AVRO,
        value_avro_schema=json.dumps(schema),
    )
    reader = KafkaReader(source)
    desc = reader.outputs["data"]
    assert [(c.name, str(c.type), c.nullable) for c in desc.columns] == [
        ("id", "int64", False),
        ("name", "text", True),
        ("at", "timestamp", False),
    ]
    chunks = _drain(reader, (), 3)
    rows = sorted(_total(chunks, "data"), key=lambda r: r[0])  # type: ignore[arg-type, return-value]
    assert [(r[0], r[1], str(r[2])) for r in rows] == [
        (1, "a", "1970-01-02 00:00:00"),
        (2, None, "1970-01-01 00:00:00"),
    ]
    assert len(_total(chunks, "errors")) == 1
    reader.close()


def test_statistics_count_the_records_of_a_kafka_point() -> None:
    from spate.storage.replica.ingestion import _offset

    assert _offset(((0, 10), (2, 5))) == 15
    assert _offset(()) == 0


class _Msg:
    """A consumed record as the reader's bulk check sees it."""

    def __init__(self, partition: int, offset: int, error: object = None) -> None:
        self._p, self._o, self._e = partition, offset, error

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def error(self) -> object:
        return self._e


@pytest.mark.parametrize(
    ("batch", "fresh"),
    [
        ([(0, 5), (0, 6), (0, 9)], True),  # gaps (transaction markers) are fine
        ([(0, 4), (0, 5)], False),  # starts before the stream: a stale fetch
        ([(0, 5), (0, 7), (0, 6)], False),  # not increasing
        ([(0, 5), (0, 5)], False),  # a record twice
        ([(0, 5), (1, 0), (0, 6)], False),  # two partitions
        ([(0, 5), (0, 6, "err"), (0, 7)], False),  # an error
        ([(2, 3), (2, 4)], True),  # a partition not read yet starts at its start offset
        ([(2, 2), (2, 3)], False),
    ],
)
def test_a_batch_is_taken_in_bulk_only_when_each_record_would_be(
    batch: list[tuple[int, ...]], fresh: bool
) -> None:
    from spate.storage.sources.kafka.reader import _fresh_run

    next_offset = {0: 5}
    got = _fresh_run(
        [_Msg(*m) for m in batch],  # type: ignore[misc]
        next_offset,
        lambda p: 3 if p == 2 else 0,
    )
    assert got is fresh
    if fresh:
        assert next_offset[batch[0][0]] == batch[-1][1] + 1
    else:
        assert next_offset == {0: 5}


def test_a_poll_that_has_caught_up_returns_before_its_budget(brokers: str) -> None:
    """The caller paces polls: a poll does not sit out its budget once the topic is read."""
    topic = _topic()
    _produce(brokers, topic, [(None, b"a"), (None, b"b"), (None, b"c")])
    source = KafkaSource(kafka_client_settings(brokers), topic, KafkaFormat.TEXT)
    reader = KafkaReader(source, poll_budget_s=20.0)
    lower: KafkaPoint = ()
    read = 0
    deadline = time.monotonic() + 30
    while read < 3:
        assert time.monotonic() < deadline
        start = time.monotonic()
        chunk = reader.poll(lower, now_millis=int(time.time() * 1000))
        assert time.monotonic() - start < 10, "the poll sat out its budget"
        if chunk is not None:
            read += sum(o for _, o in chunk.upper) - sum(o for _, o in lower)
            lower = chunk.upper
    assert read == 3
    reader.close()


def test_a_poll_budget_doubles_while_behind_and_resets_once_caught_up(brokers: str) -> None:
    topic = _topic()
    _produce(brokers, topic, [(None, str(i).encode()) for i in range(60)])
    source = KafkaSource(kafka_client_settings(brokers), topic, KafkaFormat.TEXT)
    reader = KafkaReader(
        source, max_records_per_poll=10, poll_budget_s=0.25, max_poll_budget_s=0.75
    )
    budgets = [reader.poll_budget_s]
    lower: KafkaPoint = ()
    deadline = time.monotonic() + 30
    while sum(o for _, o in lower) < 60:
        assert time.monotonic() < deadline
        chunk = reader.poll(lower, now_millis=int(time.time() * 1000))
        if chunk is not None:
            lower = chunk.upper
            budgets.append(reader.poll_budget_s)
    # Each full chunk ended behind: 0.25, 0.5, then the cap; the chunk that reached the end
    # of the topic caught up (or the next poll does) and the budget is back at its base.
    assert budgets[:4] == [0.25, 0.5, 0.75, 0.75]
    assert reader.poll(lower, now_millis=int(time.time() * 1000)) is None
    assert reader.poll_budget_s == 0.25
    reader.close()


def test_a_read_ahead_serves_the_next_poll_from_its_point_and_no_other(brokers: str) -> None:
    """A poll that ends behind reads on in a thread; the next poll from its upper starts with
    that (no record twice or skipped: what a replay of its bounds reads), and a poll from
    another point (a lost race, a restart) reads from its own point."""
    topic = _topic()
    _produce(brokers, topic, [(None, str(i).encode()) for i in range(300)])
    source = KafkaSource(kafka_client_settings(brokers), topic, KafkaFormat.TEXT)
    reader = KafkaReader(source, max_records_per_poll=100)
    fresh = KafkaReader(source)
    now = int(time.time() * 1000)
    first = None
    while first is None:
        first = reader.poll((), now_millis=now)
    assert sum(o for _, o in first.upper) == 100
    assert reader._ahead is not None  # behind: it reads on from first.upper
    time.sleep(0.3)
    second = reader.poll(first.upper, now_millis=now)
    assert second is not None and sum(o for _, o in second.upper) == 200
    assert _counts(second.updates) == _counts(fresh.replay(first.upper, second.upper).updates)
    # Not from where the read-ahead started (second.upper): it reads from its own point.
    again = reader.poll(first.upper, now_millis=now)
    assert again is not None and sum(o for _, o in again.upper) == 200
    assert _counts(again.updates) == _counts(fresh.replay(first.upper, again.upper).updates)
    everything: Counter[tuple[object, ...]] = Counter()
    for chunk in (first, second):
        everything.update(_counts(chunk.updates)["data"])
    assert len(everything) == 200 and set(everything.values()) == {1}
    reader.close()
    fresh.close()
