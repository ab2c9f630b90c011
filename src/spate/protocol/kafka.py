"""Kafka sources as a storage replica receives them: the topic, the formats and the envelope.

The client settings (``bootstrap.servers`` and any ``security.protocol``/``sasl.*`` setting of
librdkafka) travel as a :class:`~spate.protocol.secret.Secret` holding a JSON object, so that a
SASL password never reaches the catalog or the logs (:func:`kafka_client_settings` builds it).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from spate.errors import InvalidConnection
from spate.protocol.secret import Secret, SecretRef
from spate.repr.desc import RelationDesc
from spate.wire import wire


class KafkaFormat(enum.Enum):
    """How a record's key or value decodes into columns."""

    TEXT = "text"
    """UTF-8 text: one ``text`` column."""
    BYTES = "bytes"
    """The raw bytes: one ``bytea`` column."""
    JSON = "json"
    """A JSON document: one ``jsonb`` column, or the declared columns of the source taken from
    a JSON object's fields."""
    CSV = "csv"
    """One CSV line of exactly ``csv_columns`` fields: ``column1 … columnN``, all ``text``."""
    AVRO = "avro"
    """Avro binary (optionally with the Confluent wire header) of a record schema given in the
    source: one column per field."""


class KafkaEnvelope(enum.Enum):
    NONE = "none"
    """Every record is an insert."""
    UPSERT = "upsert"
    """The latest value per key: a record replaces the key's previous value, a NULL value (a
    tombstone) deletes it."""
    DEBEZIUM = "debezium"
    """Debezium change events (``{"before": …, "after": …}``, also inside ``"payload"``):
    ``before`` is retracted and ``after`` inserted."""


INCLUDABLE = ("key", "partition", "offset", "timestamp", "headers")
"""The record metadata a source can add as columns (``INCLUDE …``), in column order."""


def kafka_client_settings(brokers: str, **settings: str) -> Secret:
    """The client settings of a Kafka connection: ``brokers`` (``host:port[,host:port…]``) and
    librdkafka settings given with ``_`` for ``.`` (``security_protocol="SASL_SSL"``)."""
    if not isinstance(brokers, str) or not brokers.strip():
        raise InvalidConnection(f"a Kafka connection needs brokers (host:port), got {brokers!r}")
    config = {"bootstrap.servers": brokers}
    config.update({k.replace("_", "."): str(v) for k, v in settings.items()})
    return Secret(json.dumps(config, sort_keys=True))


@wire("storage.kafka_source")
@dataclass(frozen=True, slots=True)
class KafkaSource:
    """Ingest ``topic``: every partition, new ones as they appear, each record exactly once.

    ``connection``: the client settings (:func:`kafka_client_settings`). ``value_desc``: the
    declared columns of a JSON value (else one ``data jsonb`` column). The resume point is the
    next offset of every partition; ``start_offsets[p]`` is where partition ``p`` starts
    (partitions beyond the tuple start at 0). A record that does not decode goes to the
    source's ``errors`` output and never stops the source.
    """

    connection: Secret | SecretRef
    topic: str
    value_format: KafkaFormat = KafkaFormat.BYTES
    key_format: KafkaFormat | None = None
    envelope: KafkaEnvelope = KafkaEnvelope.NONE
    include: tuple[str, ...] = ()
    value_csv_columns: int | None = None
    value_avro_schema: str | None = None
    value_desc: RelationDesc | None = None
    start_offsets: tuple[int, ...] = ()
    poll_interval_ms: int = 100

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not self.topic:
            raise InvalidConnection("a Kafka source needs a topic")
        unknown = [i for i in self.include if i not in INCLUDABLE]
        if unknown or len(set(self.include)) != len(self.include):
            raise InvalidConnection(
                f"Kafka source INCLUDE takes each of {', '.join(INCLUDABLE)} at most once, got "
                f"{', '.join(self.include)}"
            )
        fmt = self.value_format
        n = self.value_csv_columns
        if fmt is KafkaFormat.CSV and (n is None or n < 1):
            raise InvalidConnection("value format CSV needs WITH n COLUMNS (n >= 1)")
        if fmt is KafkaFormat.AVRO and not self.value_avro_schema:
            raise InvalidConnection("value format AVRO needs USING SCHEMA '…'")
        if self.value_desc is not None and fmt is not KafkaFormat.JSON:
            raise InvalidConnection(
                f"declared columns need value format JSON (the object's fields), not {fmt.name}"
            )
        if self.key_format not in (None, KafkaFormat.TEXT, KafkaFormat.BYTES, KafkaFormat.JSON):
            raise InvalidConnection("KEY FORMAT must be TEXT, BYTES or JSON")
        if self.envelope is KafkaEnvelope.DEBEZIUM:
            if fmt not in (KafkaFormat.JSON, KafkaFormat.AVRO):
                raise InvalidConnection("ENVELOPE DEBEZIUM needs value format JSON or AVRO")
            if self.include:
                raise InvalidConnection(
                    "ENVELOPE DEBEZIUM takes no INCLUDE: a retraction has no record of its own"
                )
        if self.envelope is KafkaEnvelope.UPSERT and self.key_format is None:
            raise InvalidConnection("ENVELOPE UPSERT needs a KEY FORMAT")
        if "key" in self.include and self.key_format is None:
            raise InvalidConnection("INCLUDE KEY needs a KEY FORMAT")
        if any(o < 0 for o in self.start_offsets):
            raise InvalidConnection(f"START OFFSET must be >= 0, got {self.start_offsets}")
        if self.poll_interval_ms <= 0:
            raise InvalidConnection("poll_interval_ms must be positive")

    def start_offset(self, partition: int) -> int:
        """Where ``partition`` starts."""
        if partition < len(self.start_offsets):
            return self.start_offsets[partition]
        return 0


class KafkaSinkEnvelope(enum.Enum):
    UPSERT = "upsert"
    """A record per key and time: the key's new row, or a tombstone (NULL value) when the key
    is gone."""
    DEBEZIUM = "debezium"
    """A record per change: ``{"before": row | null, "after": row | null}``."""


@wire("storage.kafka_sink")
@dataclass(frozen=True, slots=True)
class KafkaSinkConnection:
    """Write a collection's changes into ``topic`` as JSON, exactly once.

    Each closed interval ``[lower, upper)`` is one Kafka transaction holding its records and a
    progress record (key: the sink, value: ``upper``) in ``progress_topic``, so the data and the
    sink's frontier commit together; a restarted sink reads its frontier back (read_committed)
    and its transactional id fences a previous incarnation. ``key``: the columns of the record
    key (required for ``UPSERT``).
    """

    connection: Secret | SecretRef
    topic: str
    envelope: KafkaSinkEnvelope
    key: tuple[str, ...] = ()
    progress_topic: str = "_spate_progress"

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not self.topic:
            raise InvalidConnection("a Kafka sink needs a topic")
        if self.envelope is KafkaSinkEnvelope.UPSERT and not self.key:
            raise InvalidConnection(f"an UPSERT Kafka sink into {self.topic!r} needs KEY (…)")
        if not self.progress_topic or self.progress_topic == self.topic:
            raise InvalidConnection("a Kafka sink's progress topic must differ from its topic")
