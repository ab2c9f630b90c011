"""Kafka clients from a connection's settings (librdkafka through confluent-kafka)."""

from __future__ import annotations

import json
from typing import Final

from confluent_kafka import Consumer

from spate.errors import InvalidConnection
from spate.protocol.secret import Secret, SecretRef

CONSUMER_DEFAULTS: Final = {
    # spate keeps offsets in persist: the group is only a name librdkafka asks for.
    "group.id": "spate",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "enable.partition.eof": False,
}


def client_settings(connection: Secret | SecretRef) -> dict[str, str]:
    """The librdkafka settings a connection holds (a JSON object of strings)."""
    if not isinstance(connection, Secret):
        raise InvalidConnection("a Kafka connection's settings are unresolved (a secret reference)")
    try:
        settings = json.loads(connection.reveal())
    except ValueError:
        raise InvalidConnection("a Kafka connection's settings are not a JSON object") from None
    if not isinstance(settings, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in settings.items()
    ):
        raise InvalidConnection("a Kafka connection's settings must map names to strings")
    if not settings.get("bootstrap.servers"):
        raise InvalidConnection("a Kafka connection needs bootstrap.servers (BROKER 'host:port')")
    return settings


def consumer(connection: Secret | SecretRef, **overrides: object) -> Consumer:
    """A consumer that never commits offsets to the broker (spate keeps them)."""
    config: dict[str, object] = {**CONSUMER_DEFAULTS, **client_settings(connection)}
    config.update(overrides)
    return Consumer(config)
