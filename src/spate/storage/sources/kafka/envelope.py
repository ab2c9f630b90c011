"""From Kafka records to updates of the source's ``data`` and ``errors`` outputs (no I/O).

:class:`Envelope` is the whole decoding: a sans-I/O state machine fed records in a fixed order
(by partition, then offset, within a chunk) that returns ``(row, diff)`` updates per output.

* ``NONE``: every record is ``(row, +1)``.
* ``UPSERT``: the state maps each key (its bytes) to what the key holds now: a data row or an
  error row. A record retracts what its key held and inserts its own value; a NULL value (a
  tombstone) only retracts. A value that does not decode puts an error row on the key, which
  stays in ``errors`` until a good value or a tombstone for the key replaces it.
* ``DEBEZIUM``: ``before`` is retracted and ``after`` inserted; a tombstone is skipped.

A record that does not decode (and, in UPSERT, a record without a key) is an error row
``(partition, offset, key, error)``. Errors never stop the source.

The updates of a set of records are a function of the state before them and the records, so a
source that re-reads ``[lower, upper)`` from the same state derives the same updates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from spate.protocol.kafka import KafkaEnvelope, KafkaSource
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import BYTES, INT64, JSONB, TEXT, TIMESTAMP, Datum, Row
from spate.storage.sources.kafka.formats import (
    DecodeError,
    Decoder,
    epoch_millis,
    key_decoder,
    value_decoder,
)

DATA: Final = "data"
ERRORS: Final = "errors"
ERRORS_DESC: Final = RelationDesc.of(
    ("partition", INT64, False),
    ("offset", INT64, False),
    ("key", BYTES, True),
    ("error", TEXT, False),
)
_INCLUDE_COLUMNS: Final = {
    "partition": Column("partition", INT64, False),
    "offset": Column("offset", INT64, False),
    "timestamp": Column("timestamp", TIMESTAMP, True),
    "headers": Column("headers", JSONB, True),
}


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record as the envelope sees it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(slots=True)
class Updates:
    """Updates per output: ``(row, diff)``."""

    data: list[tuple[Row, int]] = field(default_factory=list)
    errors: list[tuple[Row, int]] = field(default_factory=list)


def data_desc(source: KafkaSource) -> RelationDesc:
    """The ``data`` output's schema: the key (UPSERT, INCLUDE KEY), the value, the metadata."""
    value = value_decoder(source)
    key = key_decoder(source)
    columns: list[Column] = []
    with_key = key is not None and (
        source.envelope is KafkaEnvelope.UPSERT or "key" in source.include
    )
    if with_key:
        assert key is not None
        k = key.columns[0]
        columns.append(Column(k.name, k.type, source.envelope is not KafkaEnvelope.UPSERT))
    nullable_values = source.envelope is not KafkaEnvelope.NONE
    for c in value.columns:
        columns.append(Column(c.name, c.type, c.nullable or nullable_values))
    for name in source.include:
        if name != "key":
            columns.append(_INCLUDE_COLUMNS[name])
    return RelationDesc(columns)


def outputs(source: KafkaSource) -> dict[str, RelationDesc]:
    return {DATA: data_desc(source), ERRORS: ERRORS_DESC}


Held = tuple[str, Row]
"""What an UPSERT key holds: ``(DATA, row)`` or ``(ERRORS, row)``."""


class Envelope:
    """The decoding state of one source (see the module docs)."""

    def __init__(self, source: KafkaSource) -> None:
        self._source = source
        self._kind = source.envelope
        self._value: Decoder = value_decoder(source)
        self._key: Decoder | None = key_decoder(source)
        self._with_key = self._key is not None and (
            self._kind is KafkaEnvelope.UPSERT or "key" in source.include
        )
        self._meta = [n for n in source.include if n != "key"]
        self.state: dict[bytes, Held] = {}
        self.errors_seen = 0

    def reset(self) -> None:
        """Back to the state before any record."""
        self.state.clear()

    def apply(self, records: Sequence[Record]) -> Updates:
        """The updates of ``records`` (in this order), advancing the state."""
        out = Updates()
        for r in records:
            if self._kind is KafkaEnvelope.UPSERT:
                self._upsert(r, out)
            elif self._kind is KafkaEnvelope.DEBEZIUM:
                self._debezium(r, out)
            else:
                try:
                    out.data.append((self._row(r), 1))
                except DecodeError as e:
                    self._error(r, str(e), out)
        return out

    def _error(self, r: Record, message: str, out: Updates) -> Row:
        row: Row = (r.partition, r.offset, r.key, message)
        out.errors.append((row, 1))
        self.errors_seen += 1
        return row

    def _row(self, r: Record) -> Row:
        values: list[Datum] = []
        if self._with_key:
            assert self._key is not None
            if r.key is None:
                values.append(None)
            else:
                try:
                    values.extend(self._key.decode(r.key))
                except DecodeError as e:
                    raise DecodeError(f"key: {e}") from None
        if r.value is None:
            raise DecodeError("the value is NULL")
        values.extend(self._value.decode(r.value))
        return tuple(values) + self._metadata(r)

    def _metadata(self, r: Record) -> Row:
        out: list[Datum] = []
        for name in self._meta:
            if name == "partition":
                out.append(r.partition)
            elif name == "offset":
                out.append(r.offset)
            elif name == "timestamp":
                out.append(None if r.timestamp_ms is None else epoch_millis(r.timestamp_ms))
            else:
                out.append(
                    json.dumps(
                        [
                            [k, None if v is None else v.decode("utf-8", "backslashreplace")]
                            for k, v in r.headers
                        ],
                        separators=(",", ":"),
                    )
                )
        return tuple(out)

    def _upsert(self, r: Record, out: Updates) -> None:
        if r.key is None:
            self._error(r, "UPSERT: the record has no key", out)
            return
        old = self.state.pop(r.key, None)
        if old is not None:
            (out.data if old[0] == DATA else out.errors).append((old[1], -1))
        if r.value is None:  # a tombstone
            return
        try:
            row = self._row(r)
        except DecodeError as e:
            self.state[r.key] = (ERRORS, self._error(r, str(e), out))
            return
        out.data.append((row, 1))
        self.state[r.key] = (DATA, row)

    def _debezium(self, r: Record, out: Updates) -> None:
        if r.value is None:  # Debezium's tombstone after a delete
            return
        try:
            doc = self._value.parse(r.value)
            if isinstance(doc, dict) and isinstance(doc.get("payload"), dict):
                doc = doc["payload"]
            if not isinstance(doc, dict) or ("before" not in doc and "after" not in doc):
                raise DecodeError("not a Debezium change event: no before/after")
            before = doc.get("before")
            after = doc.get("after")
            ups = []
            if before is not None:
                ups.append((self._value.row(before), -1))
            if after is not None:
                ups.append((self._value.row(after), 1))
        except DecodeError as e:
            self._error(r, str(e), out)
            return
        out.data.extend(ups)
