"""The Kafka connections and sources that SQL describes (see :mod:`spate.sql.ddl_kafka`)."""

from __future__ import annotations

from typing import Any

from spate.environment.definitions import ConnectionEntry
from spate.protocol.kafka import (
    KafkaEnvelope,
    KafkaFormat,
    KafkaSinkConnection,
    KafkaSinkEnvelope,
    KafkaSource,
    kafka_client_settings,
)
from spate.protocol.secret import Secret
from spate.sql import statements as st
from spate.sql.errors import SqlError

_SETTINGS = {
    "security protocol": "security_protocol",
    "sasl mechanisms": "sasl_mechanisms",
    "sasl username": "sasl_username",
}


def client_settings(conn: ConnectionEntry, password: str | None) -> Secret:
    """The client settings of Kafka connection ``conn`` (``password``: the value of its SASL
    password secret)."""
    if conn.kind != "kafka":
        raise SqlError(f'connection "{conn.name}" is not a KAFKA connection', sqlstate="42809")
    opts = conn.option_map
    extra = {field: opts[key] for key, field in _SETTINGS.items() if key in opts}
    if password is not None:
        extra["sasl_password"] = password
    return kafka_client_settings(opts["broker"], **extra)


def source(stmt: st.CreateSource, settings: Secret) -> KafkaSource:
    """The Kafka source ``stmt`` describes (``settings``: its connection's
    :func:`client_settings`)."""
    opts = dict(stmt.options)
    kwargs: dict[str, Any] = {
        "value_format": KafkaFormat(str(opts["value format"])),
        "envelope": KafkaEnvelope(str(opts.get("envelope", "none"))),
        "value_desc": stmt.desc,
    }
    if "key format" in opts:
        kwargs["key_format"] = KafkaFormat(str(opts["key format"]))
    if "include" in opts:
        kwargs["include"] = tuple(str(opts["include"]).split(","))
    if "start offset" in opts:
        kwargs["start_offsets"] = tuple(int(o) for o in str(opts["start offset"]).split(","))
    if "value csv columns" in opts:
        kwargs["value_csv_columns"] = int(opts["value csv columns"])
    if "value avro schema" in opts:
        kwargs["value_avro_schema"] = str(opts["value avro schema"])
    return KafkaSource(settings, str(opts["topic"]), **kwargs)


def sink(stmt: st.CreateSink, settings: Secret) -> KafkaSinkConnection:
    """The Kafka sink ``stmt`` describes (``settings``: its connection's
    :func:`client_settings`)."""
    opts = dict(stmt.options)
    kwargs: dict[str, Any] = {}
    if "progress topic" in opts:
        kwargs["progress_topic"] = str(opts["progress topic"])
    key = tuple(k for k in str(opts.get("key", "")).split(",") if k)
    return KafkaSinkConnection(
        settings,
        str(opts["topic"]),
        KafkaSinkEnvelope(str(opts["envelope"])),
        key,
        **kwargs,
    )
