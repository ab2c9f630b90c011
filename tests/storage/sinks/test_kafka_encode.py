"""The Kafka sink's encoder against a row-at-a-time reference (its definition, kept here).

Seeded random updates (printed seed; replay with ``SPATE_SEED``) of column-wise encodable
columns (bigint, text, boolean) and of others (double, timestamp, jsonb, bytes), with repeated
keys, retractions, multiplicities and texts that need JSON escapes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from collections import defaultdict
from collections.abc import Sequence

import pytest

from spate.protocol.kafka import KafkaSinkEnvelope
from spate.repr.arrow import updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, BYTES, FLOAT64, INT64, JSONB, TEXT, TIMESTAMP, Datum, Row
from spate.storage.sinks.kafka.encode import Encoder, KafkaRecord, _json_value

SIMPLE = RelationDesc.of(("id", INT64, False), ("name", TEXT), ("ok", BOOL), ("n", INT64))
OTHER = RelationDesc.of(
    ("id", INT64, False), ("x", FLOAT64), ("at", TIMESTAMP), ("j", JSONB), ("b", BYTES)
)


def _reference(
    desc: RelationDesc,
    envelope: KafkaSinkEnvelope,
    key: Sequence[str],
    updates: list[tuple[Row, int, int]],
) -> list[KafkaRecord]:
    kinds = [c.type.kind for c in desc.columns]
    key_at = [desc.names.index(k) for k in key]

    def obj(row: Row) -> dict[str, object]:
        return {c.name: _json_value(v, k) for c, v, k in zip(desc.columns, row, kinds, strict=True)}

    def text(row: Row) -> bytes:
        return json.dumps(obj(row), separators=(",", ":")).encode()

    def key_of(row: Row) -> bytes | None:
        if not key_at:
            return None
        o = {desc.columns[i].name: _json_value(row[i], kinds[i]) for i in key_at}
        return json.dumps(o, separators=(",", ":"), sort_keys=True).encode()

    def deb(before: Row | None, after: Row | None) -> bytes:
        doc = {
            "before": None if before is None else obj(before),
            "after": None if after is None else obj(after),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    net: dict[int, dict[bytes | None, dict[Row, int]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(int))
    )
    for row, time, diff in updates:
        net[time][key_of(row)][row] += diff
    out: list[KafkaRecord] = []
    for time in sorted(net):
        for k in sorted(net[time], key=lambda k: k or b""):
            changes = {r: d for r, d in net[time][k].items() if d}
            if not changes:
                continue
            inserted = sorted((r for r, d in changes.items() if d > 0), key=text)
            retracted = sorted((r for r, d in changes.items() if d < 0), key=text)
            if envelope is KafkaSinkEnvelope.UPSERT:
                out.append((k, text(inserted[0]) if inserted else None))
                continue
            befores = [r for r in retracted for _ in range(-changes[r])]
            afters = [r for r in inserted for _ in range(changes[r])]
            if k is not None:
                while befores and afters:
                    out.append((k, deb(befores.pop(0), afters.pop(0))))
            out += [(k, deb(b, None)) for b in befores]
            out += [(k, deb(None, a)) for a in afters]
    return out


def _simple_row(rng: random.Random) -> Row:
    names: list[Datum] = [None, "", "a", 'q"uote', "back\\slash", "é", "\x7f", "tab\t", "😀"]
    return (
        rng.randrange(-3, 4) + (2**62 if rng.random() < 0.1 else 0),
        rng.choice(names),
        rng.choice([None, True, False]),
        rng.choice([None, 0, -(2**63), 2**63 - 1]),
    )


def _other_row(rng: random.Random) -> Row:
    return (
        rng.randrange(4),
        rng.choice([None, 0.5, 1e300, float("inf"), 3.0]),
        rng.choice([None, dt.datetime(2026, 1, 2, 3, 4, 5, 6)]),
        rng.choice([None, '{"a":1}', "[1,2]", '"s"']),
        rng.choice([None, b"", b"\x00\xff"]),
    )


@pytest.mark.parametrize("envelope", list(KafkaSinkEnvelope))
@pytest.mark.parametrize("key", [("id",), ("ok", "id", "ok"), ()])
def test_records_equal_the_row_at_a_time_reference(
    envelope: KafkaSinkEnvelope, key: tuple[str, ...]
) -> None:
    seed = int(os.environ.get("SPATE_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}: replay with SPATE_SEED={seed}")
    rng = random.Random(seed)
    for desc, make in ((SIMPLE, _simple_row), (OTHER, _other_row)):
        if (envelope is KafkaSinkEnvelope.UPSERT and not key) or not set(key) <= set(desc.names):
            continue
        for _ in range(40):
            pool = [make(rng) for _ in range(rng.randrange(1, 8))]
            diffs = [1] if rng.random() < 0.5 else [1, 1, 1, -1, 2, -2]  # inserts only, or not
            updates = [
                (rng.choice(pool), rng.randrange(3), rng.choice(diffs))
                for _ in range(rng.randrange(1, 30))
            ]
            table = updates_to_table(desc, updates)
            got = Encoder(desc, envelope, key).records(table)
            assert got == _reference(desc, envelope, key, updates), updates
