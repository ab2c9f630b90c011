"""From Kafka records to updates of the source's ``data`` and ``errors`` outputs (no I/O).

:class:`Envelope` is the whole decoding: a sans-I/O state machine fed records in a fixed order
(by partition, then offset, within a chunk) that returns ``(row, diff)`` updates per output.

* ``NONE``: every record is ``(row, +1)``.
* ``UPSERT``: the state maps each key to what the key holds now: a data row or an error row.
  A record retracts what its key held and inserts its own value; a NULL value (a tombstone)
  only retracts. A value that does not decode puts an error row on the key, which stays in
  ``errors`` until a good value or a tombstone for the key replaces it. A key is its decoded
  value (:func:`key_identity`: two encodings of one JSON key are one key, as the ``data``
  output has one row per key); a key that does not decode is its bytes (its records are
  errors held on those bytes). The state is on local disk
  (:class:`~spate.storage.sources.kafka.upsert_state.UpsertState`) and is a function of the
  outputs' contents: :meth:`Envelope.restore` rebuilds it from them.
* ``DEBEZIUM``: ``before`` is retracted and ``after`` inserted; a tombstone is skipped.

A record that does not decode (and, in UPSERT, a record without a key) is an error row
``(partition, offset, key, error)``. Errors never stop the source.

The updates of a set of records are a function of the state before them and the records, so a
source that re-reads ``[lower, upper)`` from the same state derives the same updates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from spate.errors import SourceError
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
from spate.storage.sources.kafka.upsert_state import Held, UpsertState

DATA: Final = "data"
ERRORS: Final = "errors"
ERRORS_DESC: Final = RelationDesc.of(
    ("partition", INT64, False),
    ("offset", INT64, False),
    ("key", BYTES, True),
    ("error", TEXT, False),
)
_RESTORE_BATCH: Final = 10_000
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


def key_identity(key: bytes, decoded: Datum | DecodeError | None) -> bytes:
    """An UPSERT key's identity in the state: its decoded value (``decoded``: TEXT and JSON
    keys decode to text, BYTES keys to bytes), or, when it did not decode (or keys are not
    decoded: ``None``), its bytes. The three are apart by their first byte."""
    if isinstance(decoded, str):
        return b"t" + decoded.encode("utf-8", "surrogatepass")
    if isinstance(decoded, bytes):
        return b"b" + decoded
    if decoded is None or isinstance(decoded, DecodeError):
        return b"r" + key
    raise SourceError(f"UPSERT: a key decodes to {type(decoded).__name__}, not text or bytes")


class Envelope:
    """The decoding state of one source (see the module docs)."""

    def __init__(self, source: KafkaSource, *, state_dir: str | None = None) -> None:
        self._source = source
        self._kind = source.envelope
        self._value: Decoder = value_decoder(source)
        self._key: Decoder | None = key_decoder(source)
        self._with_key = self._key is not None and (
            self._kind is KafkaEnvelope.UPSERT or "key" in source.include
        )
        self._meta = [n for n in source.include if n != "key"]
        self.state: UpsertState | None = (
            UpsertState(state_dir) if self._kind is KafkaEnvelope.UPSERT else None
        )
        self.errors_seen = 0

    def close(self) -> None:
        if self.state is not None:
            self.state.close()

    @property
    def restorable(self) -> bool:
        """Whether :meth:`restore` can rebuild the UPSERT state from the outputs (the ``data``
        rows carry their decoded key)."""
        return self.state is not None and self._key is not None

    def restore(self, data: Iterable[Row], errors: Iterable[Row]) -> None:
        """Make the UPSERT state the one whose outputs hold ``data`` and ``errors`` (each row
        once), in the state's open transaction: each data row is held by its key (its first
        column), each error row with a key by that key (decoded again, as when it was made);
        an error row without a key is held by none. Raises :class:`SourceError` when two rows
        are of one key (the outputs are not an UPSERT source's)."""
        assert self.state is not None and self._key is not None
        self.state.clear()
        batch: list[tuple[bytes, Held]] = []
        twice = 0

        def flush() -> None:
            nonlocal twice
            assert self.state is not None
            twice += self.state.insert_new(batch)
            batch.clear()

        for row in data:
            k = row[0]
            if not isinstance(k, (str, bytes)):
                raise SourceError(f"UPSERT: a data row without a text or bytes key: {row!r}")
            batch.append((key_identity(b"", k), (DATA, row)))
            if len(batch) >= _RESTORE_BATCH:
                flush()
        for row in errors:
            raw = row[2]
            if raw is None:
                continue
            if not isinstance(raw, bytes):
                raise SourceError(f"UPSERT: an error row whose key is not bytes: {row!r}")
            batch.append((key_identity(raw, self._decoded_key(raw)), (ERRORS, row)))
            if len(batch) >= _RESTORE_BATCH:
                flush()
        flush()
        if twice:
            raise SourceError(
                f"UPSERT: the outputs hold {twice} row(s) of a key that already holds one"
            )

    def _decoded_key(self, raw: bytes) -> Datum | DecodeError | None:
        if self._key is None:
            return None
        try:
            return self._key.decode(raw)[0]
        except DecodeError as e:
            return e

    def apply(self, records: Sequence[Record]) -> Updates:
        """The updates of ``records`` (in this order), advancing the state."""
        out = Updates()
        if self._kind is KafkaEnvelope.UPSERT:
            self._upsert_all(records, out)
            return out
        for r in records:
            if self._kind is KafkaEnvelope.DEBEZIUM:
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

    def _row(self, r: Record, key: Datum | DecodeError | None = None) -> Row:
        """The data row of ``r``; ``key``: its key already decoded (or why it did not)."""
        values: list[Datum] = []
        if self._with_key:
            assert self._key is not None
            if r.key is None:
                values.append(None)
            else:
                if key is None:
                    key = self._decoded_key(r.key)
                if isinstance(key, DecodeError):
                    raise DecodeError(f"key: {key}")
                values.append(key)
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

    def _upsert_all(self, records: Sequence[Record], out: Updates) -> None:
        """Read what the records' keys hold, apply the records in order, write back."""
        assert self.state is not None
        keys: list[tuple[bytes, Datum | DecodeError | None] | None] = []
        for r in records:
            if r.key is None:
                keys.append(None)
            else:
                decoded = self._decoded_key(r.key)
                keys.append((key_identity(r.key, decoded), decoded))
        held = self.state.get_many({k[0] for k in keys if k is not None})
        changed: dict[bytes, Held | None] = {}
        for r, k in zip(records, keys, strict=True):
            if k is None:
                self._error(r, "UPSERT: the record has no key", out)
                continue
            identity, decoded = k
            old = held.pop(identity, None)
            if old is not None:
                (out.data if old[0] == DATA else out.errors).append((old[1], -1))
            new: Held | None = None
            if r.value is not None:  # else a tombstone
                try:
                    row = self._row(r, decoded)
                except DecodeError as e:
                    new = (ERRORS, self._error(r, str(e), out))
                else:
                    out.data.append((row, 1))
                    new = (DATA, row)
                held[identity] = new
            changed[identity] = new
        self.state.write(changed)

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
