"""The batch JSON decoder gives exactly the per-record decoder's table, or declines.

No broker: the decoders see values directly. Each case compares :class:`JsonBatch` with the
per-record path (:class:`Envelope`, then the rows' table), which is the definition.
"""

from __future__ import annotations

import json
import os
import random

import pyarrow as pa
import pytest

from spate.protocol.kafka import KafkaEnvelope, KafkaFormat, KafkaSource, kafka_client_settings
from spate.repr.arrow import rows_to_table
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import BOOL, FLOAT64, INT64, JSONB, TEXT
from spate.storage.sources.kafka.envelope import DATA, ERRORS, Envelope, Record, outputs
from spate.storage.sources.kafka.json_batch import JsonBatch

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT), ("f", FLOAT64), ("b", BOOL), ("n", INT64))


def _source(
    desc: RelationDesc = DESC,
    *,
    envelope: KafkaEnvelope = KafkaEnvelope.NONE,
    include: tuple[str, ...] = (),
    key_format: KafkaFormat | None = None,
) -> KafkaSource:
    return KafkaSource(
        kafka_client_settings("127.0.0.1:1"),
        "t",
        KafkaFormat.JSON,
        value_desc=desc,
        envelope=envelope,
        include=include,
        key_format=key_format,
    )


def _per_record(source: KafkaSource, values: list[bytes | None]) -> tuple[pa.Table | None, int]:
    """The data table the per-record path gives, and its number of errors."""
    env = Envelope(source)
    ups = env.apply([Record(0, 10 + i, None, v) for i, v in enumerate(values)])
    if not ups.data:
        return None, len(ups.errors)
    table = rows_to_table(outputs(source)[DATA], [r for r, _ in ups.data])
    diffs = pa.array([d for _, d in ups.data], pa.int64())
    table = table.append_column(pa.field(DIFF_COLUMN, pa.int64(), nullable=False), diffs)
    return table, len(ups.errors)


def _check(source: KafkaSource, values: list[bytes | None]) -> pa.Table | None:
    batch = JsonBatch.for_source(source, outputs(source)[DATA])
    assert batch is not None
    got = batch.decode(
        values, lambda name: [0 if name == "partition" else 10 + i for i in range(len(values))]
    )
    want, errors = _per_record(source, values)
    if got is not None:
        assert errors == 0, f"the batch decoded {values!r}, which has bad records"
        assert want is not None
        assert got.schema == want.schema
        assert got.equals(want), (got.to_pylist(), want.to_pylist())
    return got


def test_clean_values_decode_in_one_batch_as_record_by_record() -> None:
    values = [
        json.dumps({"k": i, "v": f"v{i}", "f": i / 3, "b": i % 2 == 0, "n": None}).encode()
        for i in range(1000)
    ]
    values.append(b'{"k": -0, "f": -0.0, "x": {"nested": [1, 2, null]}, "v": "\\ud83d\\ude00"}')
    values.append(b' {"k": 9223372036854775807, "f": 12, "v": "caf\\u00e9 \xc3\xa9"} ')
    assert _check(_source(), values) is not None


def test_metadata_columns_come_from_the_records() -> None:
    values = [b'{"k": 1}', b'{"k": 2}']
    got = _check(_source(include=("offset", "partition")), values)
    assert got is not None
    assert got.column("offset").to_pylist() == [10, 11]
    assert got.column("partition").to_pylist() == [0, 0]


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"  ",
        None,
        b"not json",
        b"[1, 2]",
        b"5",
        b'{"k": "1"}',
        b'{"k": 1.0}',
        b'{"k": 1e3}',
        b'{"k": true}',
        b'{"k": 99999999999999999999}',
        b'{"v": 5}',
        b'{"v": {"x": 1}}',
        b'{"v": "a\\u0000b"}',
        b'{"v": "\\ud800"}',
        b'{"b": 1}',
        b'{"f": "1"}',
        b'{"f": NaN}',
        b'{"x": Infinity}',
        b'{"f": 1e400}',
        b'{"k": 1, "k": 2}',
        b'{"k": 1} {"k": 2}',
        b'{"k": 1}{"k": 2}',
        b'{"k": 1}\n{"k": 2}',
        b'{"k":\r1}',
        b'\xef\xbb\xbf{"k": 1}',
        b'{"v": "\xff"}',
        b'{"v": "\t"}',
        b'{"k": 1,}',
        b'{"v": "missing k"}',
        b'{"k": null}',
        b'{"k": 1, "x": ' + b"[" * 600 + b"]" * 600 + b"}",
        b'{"k": 1, "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ],
)
def test_a_doubtful_value_leaves_the_chunk_to_the_per_record_path(bad: bytes | None) -> None:
    """Bad, or decoded alike only by luck: the batch declines, whatever the other values."""
    values = [b'{"k": 1, "v": "a"}', bad, b'{"k": 3}']
    _check(_source(), values)  # never a different table
    assert JsonBatch(DESC, outputs(_source())[DATA]).decode(values, lambda _: [0, 1, 2]) is None


def test_random_documents_agree_with_the_per_record_path() -> None:
    seed = int(os.environ.get("SPATE_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}: replay with SPATE_SEED={seed}")
    rng = random.Random(seed)
    pool: list[object] = [
        None, 0, -1, 2**63 - 1, -(2**63), 2**63, 1.5, -0.0, 1e300, True, False, "", "x",
        "é\u2028", "tab\t", [1], {"a": 1},
    ]  # fmt: skip
    fitting: dict[str, list[object]] = {
        "k": [0, -1, 2**63 - 1, -(2**63)],
        "v": ["", "x", "é\u2028", "tab\t", None],
        "f": [1.5, -0.0, 1e300, 3, None],
        "b": [True, False, None],
        "n": [None, 5],
        "other": pool,
    }
    batched = 0
    for _ in range(300):
        values = []
        for _ in range(rng.randrange(1, 6)):
            doc = {
                n: rng.choice(good if rng.random() < 0.97 else pool)
                for n, good in fitting.items()
                if rng.random() < 0.98
            }
            values.append(json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode())
        if _check(_source(), values) is not None:
            batched += 1
    assert batched > 0  # the batch path was exercised


@pytest.mark.parametrize(
    "source",
    [
        _source(envelope=KafkaEnvelope.UPSERT, key_format=KafkaFormat.TEXT),
        _source(include=("key",), key_format=KafkaFormat.TEXT),
        _source(include=("timestamp",)),
        _source(RelationDesc.of(("j", JSONB))),
        KafkaSource(kafka_client_settings("127.0.0.1:1"), "t", KafkaFormat.JSON),
    ],
)
def test_other_sources_use_the_per_record_path(source: KafkaSource) -> None:
    assert JsonBatch.for_source(source, outputs(source)[DATA]) is None
    assert ERRORS in outputs(source)
