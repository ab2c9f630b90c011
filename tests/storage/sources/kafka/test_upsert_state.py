"""The UPSERT source's key state: on disk, committed with the point, rebuilt from the outputs.

Against librdkafka's mock cluster. A reader restarted between batches is restored from what
its outputs hold (as persist would hand them) and reads nothing again from the topic; the
outputs then equal a recomputation over every record. Updates not committed are undone when
the source goes on from the committed point, and the key set is never held in Python."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from spate.protocol.kafka import KafkaEnvelope, KafkaFormat, KafkaSource, kafka_client_settings
from spate.repr.arrow import rows_to_table
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Row
from spate.storage.sources.kafka.envelope import DATA, ERRORS
from spate.storage.sources.kafka.formats import DecodeError, key_decoder
from spate.storage.sources.kafka.reader import KafkaPoint, KafkaReader
from spate.testing.kafka import mock_cluster
from tests.storage.sources.kafka.test_kafka_reader import _counts, _drain, _topic, _total

KV = tuple[bytes | None, bytes | None]


@pytest.fixture(scope="module")
def brokers() -> Iterator[str]:
    with mock_cluster() as bootstrap:
        yield bootstrap


def _source(brokers: str, topic: str) -> KafkaSource:
    return KafkaSource(
        kafka_client_settings(brokers),
        topic,
        KafkaFormat.TEXT,
        key_format=KafkaFormat.JSON,
        envelope=KafkaEnvelope.UPSERT,
    )


def _produce(brokers: str, topic: str, records: list[KV]) -> None:
    """Into partition 0, so that offsets are the produce order."""
    p = Producer({"bootstrap.servers": brokers, "linger.ms": 5})
    for key, value in records:
        p.produce(topic, key=key, value=value, partition=0)
    assert p.flush(30) == 0


def _records(rng: random.Random, n: int, keys: int) -> list[KV]:
    """Updates, tombstones and bad values of ``keys`` JSON keys (each spelled two ways),
    keys that are not JSON, and records without a key."""
    out: list[KV] = []
    for _ in range(n):
        k = rng.randrange(keys)
        key = (f'{{"id": {k}}}' if rng.random() < 0.5 else f'{{"id":{k}}}').encode()
        x = rng.random()
        if x < 0.03:
            out.append((None, b"no key"))
        elif x < 0.06:
            out.append((f"{{bad {k % 3}".encode(), None if rng.random() < 0.5 else b"v"))
        elif x < 0.2:
            out.append((key, None))
        elif x < 0.3:
            out.append((key, b"\xff not utf-8"))
        else:
            out.append((key, f"v{rng.randrange(1000)}".encode()))
    return out


def _recompute(source: KafkaSource, records: list[KV]) -> tuple[Counter[Row], set[Row]]:
    """What the outputs hold after ``records`` (offsets 0, 1, …): data rows, and the errors'
    ``(partition, offset, key)``."""
    decoder = key_decoder(source)
    assert decoder is not None
    held: dict[object, tuple[str, Row]] = {}
    keyless: set[Row] = set()
    for offset, (key, value) in enumerate(records):
        if key is None:
            keyless.add((0, offset, None))
            continue
        try:
            ident: object = ("key", decoder.decode(key)[0])
        except DecodeError:
            ident = ("raw", key)
        held.pop(ident, None)
        if value is None:
            continue
        if ident[0] == "raw":
            held[ident] = (ERRORS, (0, offset, key))
            continue
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            held[ident] = (ERRORS, (0, offset, key))
            continue
        held[ident] = (DATA, (ident[1], text))
    data = Counter(row for out, row in held.values() if out == DATA)
    errors = keyless | {row for out, row in held.values() if out == ERRORS}
    return data, errors


def _error_keys(errors: Counter[tuple[object, ...]]) -> set[Row]:
    assert all(n == 1 for n in errors.values())
    return {r[:3] for r in errors}


def _as_outputs(
    reader: KafkaReader, contents: dict[str, Counter[tuple[object, ...]]]
) -> dict[str, pa.Table]:
    """The outputs' contents as persist hands them: data columns and ``_diff``."""
    out = {}
    for name in (DATA, ERRORS):
        desc: RelationDesc = reader.outputs[name]
        rows = list(contents[name].elements())
        table = rows_to_table(desc, rows)
        out[name] = table.append_column(
            pa.field(DIFF_COLUMN, pa.int64(), nullable=False), pa.array([1] * len(rows), pa.int64())
        )
    return out


def _plus(
    a: dict[str, Counter[tuple[object, ...]]], b: dict[str, Counter[tuple[object, ...]]]
) -> dict[str, Counter[tuple[object, ...]]]:
    out = {}
    for name in (DATA, ERRORS):
        c = Counter(a.get(name, Counter()))
        c.update(b.get(name, Counter()))
        out[name] = Counter({k: v for k, v in c.items() if v})
    return out


def _contents(
    chunks: list[tuple[KafkaPoint, KafkaPoint, dict[str, Counter[tuple[object, ...]]]]],
) -> dict[str, Counter[tuple[object, ...]]]:
    return {DATA: _total(chunks, DATA), ERRORS: _total(chunks, ERRORS)}


def test_a_reader_restarted_between_batches_is_restored_from_its_outputs(brokers: str) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed={seed}")
    rng = random.Random(seed)
    topic = _topic()
    source = _source(brokers, topic)
    first = _records(rng, 400, 60)
    _produce(brokers, topic, first)
    reader = KafkaReader(source, max_records_per_poll=50)
    chunks = _drain(reader, (), len(first))
    point = chunks[-1][1]
    reader.committed(point)
    before = _contents(chunks)
    want_data, want_errors = _recompute(source, first)
    assert before[DATA] == want_data
    assert _error_keys(before[ERRORS]) == want_errors
    reader.close()

    # Updates and deletes of the old keys, and new ones, while no reader runs.
    second = _records(rng, 400, 90)
    _produce(brokers, topic, second)
    restarted = KafkaReader(source, max_records_per_poll=50)
    assert restarted.needs_outputs(point)
    assert restarted.restore(point, _as_outputs(restarted, before))
    assert not restarted.needs_outputs(point)
    more = _drain(restarted, point, len(second))
    after = _plus(before, _contents(more))
    want_data, want_errors = _recompute(source, first + second)
    assert after[DATA] == want_data
    assert _error_keys(after[ERRORS]) == want_errors
    assert restarted.records_reread == 0  # the topic before the point was not read again
    restarted.close()

    # Without its outputs, a reader rebuilds the state from the topic: the same updates.
    fresh = KafkaReader(source)
    lower, upper = more[0][0], more[-1][1]
    assert _counts(fresh.replay(lower, upper).updates) == _contents(more)
    assert fresh.records_reread == len(first)
    fresh.close()


def test_changes_not_committed_are_undone_when_the_source_goes_on_from_the_committed_point(
    brokers: str,
) -> None:
    topic = _topic()
    source = _source(brokers, topic)
    _produce(brokers, topic, [(b'"a"', b"1"), (b'"b"', b"2")])
    reader = KafkaReader(source)
    chunks = _drain(reader, (), 2)
    committed = chunks[-1][1]
    reader.committed(committed)
    _produce(brokers, topic, [(b'"a"', b"3"), (b'"b"', None), (b'"c"', b"\xff")])
    lost = _drain(reader, committed, 3)  # read, but the binding is lost: never committed
    assert _total(lost, DATA) == Counter({('"a"', "3"): 1, ('"a"', "1"): -1, ('"b"', "2"): -1})
    # Another try from the committed point: the same updates, from the committed state.
    again = reader.replay(committed, lost[-1][1])
    assert _counts(again.updates) == _contents(lost)
    reader.committed(lost[-1][1])
    _produce(brokers, topic, [(b'"c"', b"4"), (b'"a"', None)])
    last = _drain(reader, lost[-1][1], 2)
    assert _total(last, DATA) == Counter({('"c"', "4"): 1, ('"a"', "3"): -1})
    assert [r[2] for r, n in _total(last, ERRORS).items() if n == -1] == [b'"c"']
    assert reader.records_reread == 0
    reader.close()


def test_the_key_set_is_on_disk_not_in_python(brokers: str) -> None:
    """20,000 keys read 500 records at a time: Python holds one batch's keys at most."""
    topic = _topic()
    source = _source(brokers, topic)
    keys = 20_000
    records: list[KV] = [(json.dumps(k).encode(), f"v{k}".encode()) for k in range(keys)]
    records += [(json.dumps(k).encode(), None) for k in range(0, keys, 10)]
    _produce(brokers, topic, records)
    reader = KafkaReader(source, max_records_per_poll=500)
    chunks = _drain(reader, (), len(records))
    reader.committed(chunks[-1][1])
    state = reader._envelope.state
    assert state is not None
    assert len(state) == keys - keys // 10
    assert 0 < state.max_resident <= 500
    assert len(_total(chunks, DATA)) == keys - keys // 10
    reader.close()


def test_a_state_directory_left_by_a_process_that_is_gone_is_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    from spate.storage.sources.kafka.upsert_state import UpsertState

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    orphan = tmp_path / f"spate-upsert-{int(gone.stdout)}-abc"
    orphan.mkdir()
    (orphan / "state.db").write_bytes(b"x")
    other = tmp_path / "spate-upsert-notes"
    other.mkdir()
    state = UpsertState(str(tmp_path))
    mine = [p for p in tmp_path.iterdir() if p.name.startswith(f"spate-upsert-{os.getpid()}-")]
    assert len(mine) == 1
    assert not orphan.exists() and other.exists()
    state.write({b"k": (DATA, (1, "a"))})
    state.commit()
    assert state.get_many([b"k", b"x"]) == {b"k": (DATA, (1, "a"))}
    state.close()
    assert not mine[0].exists()


def test_rows_of_every_decoded_type_are_kept_as_they_were() -> None:
    import datetime as dt
    import decimal

    from spate.storage.sources.kafka.upsert_state import decode_row, encode_row

    row = (
        1,
        -(2**63),
        1.5,
        True,
        None,
        "text",
        b"\x00bytes",
        dt.datetime(2026, 1, 2, 3, 4, 5, 678),
        dt.date(2026, 1, 2),
        decimal.Decimal("12.340"),
    )
    back = decode_row(encode_row(row))
    assert back == row
    assert [type(v) for v in back] == [type(v) for v in row]
    assert str(back[-1]) == "12.340"
