"""From the updates of an interval to Kafka records (no I/O).

Records come in time order; within a time, by key (its JSON text), so the same updates always
give the same records. Values are JSON objects of the columns: numeric as text, timestamps and
dates in ISO 8601, bytes in base64, ``jsonb`` as the JSON it holds.

* ``UPSERT``: for each time and key whose contents changed, one record: the key's row
  (``value``), or a tombstone (``None``) when the key has no row left. A key with several rows
  at one time (not a key) gives its first row by JSON text.
* ``DEBEZIUM``: for each change ``{"before": …, "after": …}``: with a key, a retraction and an
  insertion of one key at one time pair into one update; without, each row retracted or
  inserted is a record of its own, repeated by its multiplicity.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from collections import defaultdict
from collections.abc import Sequence

import pyarrow as pa

from spate.protocol.kafka import KafkaSinkEnvelope
from spate.repr.arrow import table_to_rows
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind

KafkaRecord = tuple[bytes | None, bytes | None]


def _json_value(value: Datum, kind: ScalarKind) -> object:
    if value is None:
        return None
    if kind is ScalarKind.JSONB:
        return json.loads(str(value))
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class Encoder:
    """Encodes the updates of ``desc`` for one envelope and key (column names)."""

    def __init__(self, desc: RelationDesc, envelope: KafkaSinkEnvelope, key: Sequence[str]) -> None:
        missing = [k for k in key if k not in desc.names]
        if missing:
            raise ValueError(
                f"key column {', '.join(missing)} not found; columns: {', '.join(desc.names)}"
            )
        self._desc = desc
        self._envelope = envelope
        self._kinds = [c.type.kind for c in desc.columns]
        self._key_at = [desc.names.index(k) for k in key]

    def _object(self, row: Row) -> dict[str, object]:
        return {
            c.name: _json_value(v, k)
            for c, v, k in zip(self._desc.columns, row, self._kinds, strict=True)
        }

    def _key(self, row: Row) -> bytes | None:
        if not self._key_at:
            return None
        obj = {
            self._desc.columns[i].name: _json_value(row[i], self._kinds[i]) for i in self._key_at
        }
        return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()

    def _text(self, row: Row) -> bytes:
        return json.dumps(self._object(row), separators=(",", ":")).encode()

    def _value(self, row: Row | None) -> bytes | None:
        if row is None:
            return None
        return json.dumps(self._object(row), separators=(",", ":")).encode()

    def records(self, updates: pa.Table) -> list[KafkaRecord]:
        """The records of ``updates`` (data columns, ``_time``, ``_diff``), in order."""
        rows = table_to_rows(updates, list(self._desc.names))
        times = updates.column(TIME_COLUMN).to_pylist()
        diffs = updates.column(DIFF_COLUMN).to_pylist()
        # time -> key -> row -> net diff
        net: dict[int, dict[bytes | None, dict[Row, int]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(int))
        )
        for row, time, diff in zip(rows, times, diffs, strict=True):
            net[time][self._key(row)][row] += diff
        out: list[KafkaRecord] = []
        for time in sorted(net):
            by_key = net[time]
            for key in sorted(by_key, key=lambda k: k or b""):
                changes = {r: d for r, d in by_key[key].items() if d}
                if not changes:
                    continue
                out.extend(self._changes(key, changes))
        return out

    def _changes(self, key: bytes | None, changes: dict[Row, int]) -> list[KafkaRecord]:
        inserted = sorted((r for r, d in changes.items() if d > 0), key=self._text)
        retracted = sorted((r for r, d in changes.items() if d < 0), key=self._text)
        if self._envelope is KafkaSinkEnvelope.UPSERT:
            return [(key, self._value(inserted[0]) if inserted else None)]
        befores = [r for r in retracted for _ in range(-changes[r])]
        afters = [r for r in inserted for _ in range(changes[r])]
        out: list[KafkaRecord] = []
        if key is not None:
            while befores and afters:
                out.append((key, self._debezium(befores.pop(0), afters.pop(0))))
        out += [(key, self._debezium(b, None)) for b in befores]
        out += [(key, self._debezium(None, a)) for a in afters]
        return out

    def _debezium(self, before: Row | None, after: Row | None) -> bytes:
        doc = {
            "before": None if before is None else self._object(before),
            "after": None if after is None else self._object(after),
        }
        return json.dumps(doc, separators=(",", ":")).encode()
