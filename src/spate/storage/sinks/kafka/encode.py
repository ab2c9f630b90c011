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
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.protocol.kafka import KafkaSinkEnvelope
from spate.repr.arrow import table_to_rows
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind

KafkaRecord = tuple[bytes | None, bytes | None]


_COMPACT: Final = json.JSONEncoder(separators=(",", ":")).encode
_COMPACT_SORTED: Final = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
_VECTOR_KINDS: Final = frozenset({ScalarKind.INT64, ScalarKind.TEXT, ScalarKind.BOOL})
"""Kinds whose JSON text Arrow builds column-wise, and for which distinct values have distinct
texts (so updates may be netted by their text)."""
_NEEDS_ESCAPE: Final = r'[^\x20-\x7e]|["\\]'


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


def _json_column(column: pa.ChunkedArray, kind: ScalarKind) -> pa.ChunkedArray:
    """The JSON text of each value of a column of one of :data:`_VECTOR_KINDS` (as
    ``json.dumps`` writes it: ASCII only)."""
    if kind is ScalarKind.INT64:
        text = pc.cast(column, pa.string())
    elif kind is ScalarKind.BOOL:
        text = pc.if_else(column, "true", "false")
    elif pc.any(pc.match_substring_regex(column, _NEEDS_ESCAPE)).as_py():
        text = pa.chunked_array(
            [
                pa.array(
                    [None if v is None else _COMPACT(v) for v in column.to_pylist()], pa.string()
                )
            ]
        )
    else:
        text = pc.binary_join_element_wise('"', column, '"', "")
    return pc.fill_null(text, "null")


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
        self._names = list(desc.names)
        self._kinds = [c.type.kind for c in desc.columns]
        self._key_at = [desc.names.index(k) for k in key]
        self._vector = all(k in _VECTOR_KINDS for k in self._kinds) and len(
            set(self._names)
        ) == len(self._names)

    def _object(self, row: Row) -> dict[str, object]:
        return {n: _json_value(v, k) for n, v, k in zip(self._names, row, self._kinds, strict=True)}

    def _key(self, row: Row) -> bytes | None:
        if not self._key_at:
            return None
        obj = {self._names[i]: _json_value(row[i], self._kinds[i]) for i in self._key_at}
        return _COMPACT_SORTED(obj).encode()

    def _texts(self, updates: pa.Table) -> tuple[pa.ChunkedArray | None, pa.ChunkedArray]:
        """Each update's key (binary; ``None``: no key) and value text (string), column-wise
        (see :data:`_VECTOR_KINDS`)."""
        cols = {
            n: _json_column(updates.column(n), k)
            for n, k in zip(self._names, self._kinds, strict=True)
        }

        def obj(names: Sequence[str]) -> pa.ChunkedArray:
            parts: list[object] = ["{"]
            for i, n in enumerate(names):
                parts += [("," if i else "") + _COMPACT(n) + ":", cols[n]]
            return pc.binary_join_element_wise(*parts, "}", "")

        texts = obj(self._names)
        if not self._key_at:
            return None, texts
        key_names = sorted({self._names[i] for i in self._key_at})
        return pc.cast(obj(key_names), pa.binary()), texts

    def _inserts_only(
        self, updates: pa.Table, keys: pa.ChunkedArray | None, texts: pa.ChunkedArray
    ) -> list[KafkaRecord] | None:
        """The records, column-wise, when every update inserts one row and (with a key) no key
        changes twice at one time: then each update is one record, ordered by time and key (or,
        without a key, by time and text). ``None`` otherwise."""
        n = updates.num_rows
        if n == 0 or not pc.all(pc.equal(updates.column(DIFF_COLUMN), 1)).as_py():
            return None
        times = updates.column(TIME_COLUMN)
        by = texts if keys is None else keys
        order = pc.sort_indices(
            pa.table({"t": times, "b": by}), sort_keys=[("t", "ascending"), ("b", "ascending")]
        )
        if keys is not None and n > 1:
            t, b = pc.take(times, order), pc.take(by, order)
            same = pc.and_(pc.equal(t[1:], t[:-1]), pc.equal(b[1:], b[:-1]))
            if pc.any(same).as_py():
                return None
        values = pc.take(texts, order)
        if self._envelope is KafkaSinkEnvelope.DEBEZIUM:
            values = pc.binary_join_element_wise('{"before":null,"after":', values, "}", "")
        out: list[bytes] = pc.cast(values, pa.binary()).to_pylist()
        if keys is None:
            return [(None, v) for v in out]
        return list(zip(pc.take(keys, order).to_pylist(), out, strict=True))

    def records(self, updates: pa.Table) -> list[KafkaRecord]:
        """The records of ``updates`` (data columns, ``_time``, ``_diff``), in order."""
        if self._vector:
            key_array, text_array = self._texts(updates)
            fast = self._inserts_only(updates, key_array, text_array)
            if fast is not None:
                return fast
        times = updates.column(TIME_COLUMN).to_pylist()
        diffs = updates.column(DIFF_COLUMN).to_pylist()
        # (time, key) -> value text -> net diff
        net: dict[tuple[int, bytes | None], dict[str, int]] = {}
        if self._vector:
            texts: list[str] = text_array.to_pylist()
            keys: list[bytes | None] = (
                [None] * len(texts) if key_array is None else key_array.to_pylist()
            )
            for time, key, text, diff in zip(times, keys, texts, diffs, strict=True):
                group = net.get((time, key))
                if group is None:
                    net[(time, key)] = {text: diff}
                else:
                    group[text] = group.get(text, 0) + diff
        else:
            by_row: dict[tuple[int, bytes | None], dict[Row, int]] = defaultdict(
                lambda: defaultdict(int)
            )
            rows = table_to_rows(updates, self._names)
            for row, time, diff in zip(rows, times, diffs, strict=True):
                by_row[(time, self._key(row))][row] += diff
            for at, row_diffs in by_row.items():
                group = net[at] = {}
                for row, diff in row_diffs.items():
                    if diff:
                        text = _COMPACT(self._object(row))
                        group[text] = group.get(text, 0) + diff
        out: list[KafkaRecord] = []
        # By time, then key: keys are all bytes or all None (no key), and unique within a time.
        for at in sorted(net):
            changes = net[at]
            if len(changes) == 1:
                ((text, diff),) = changes.items()
                if diff == 0:
                    continue
                if diff == 1 or self._envelope is KafkaSinkEnvelope.UPSERT:
                    out += self._changes(
                        at[1], [text] if diff > 0 else [], [] if diff > 0 else [text]
                    )
                    continue
            afters = sorted(t for t, d in changes.items() for _ in range(d))
            befores = sorted(t for t, d in changes.items() for _ in range(-d))
            if afters or befores:
                out += self._changes(at[1], afters, befores)
        return out

    def _changes(
        self, key: bytes | None, afters: list[str], befores: list[str]
    ) -> list[KafkaRecord]:
        """The records of one key's changes at one time (texts in order, by multiplicity)."""
        if self._envelope is KafkaSinkEnvelope.UPSERT:
            return [(key, afters[0].encode() if afters else None)]
        out: list[KafkaRecord] = []
        i = 0
        if key is not None:
            while i < len(befores) and i < len(afters):
                out.append((key, _debezium(befores[i], afters[i])))
                i += 1
        out += [(key, _debezium(b, None)) for b in befores[i:]]
        out += [(key, _debezium(None, a)) for a in afters[i:]]
        return out


def _debezium(before: str | None, after: str | None) -> bytes:
    """``{"before": …, "after": …}`` as ``json.dumps`` writes it, from the rows' texts."""
    b = "null" if before is None else before
    a = "null" if after is None else after
    return f'{{"before":{b},"after":{a}}}'.encode()
