"""Where a sink writes: pass one of these to ``Environment.create_sink``.

* :class:`ParquetSinkConnection` — one Parquet file per closed interval in a directory, with
  the data columns plus ``_time`` and ``_diff``, listed in a progress manifest.
* :class:`KafkaSinkConnection` — a Kafka topic, JSON records (:class:`KafkaSinkEnvelope`
  ``UPSERT`` by a key, or ``DEBEZIUM``), each interval in one Kafka transaction with its
  progress.
* :class:`PostgresSinkConnection` — a PostgreSQL table, kept equal to the collection
  (:attr:`PostgresSinkMode.UPSERT`, by a key) or appended every change
  (:attr:`PostgresSinkMode.CHANGELOG`); each interval in one transaction with its progress.

Both write every interval exactly once, across restarts. A connection string with a password
goes in a :class:`Secret`.

Example::

    from spate.sinks import PostgresSinkConnection, PostgresSinkMode, Secret

    env.create_sink(
        "best_out",
        from_="best",
        connection=PostgresSinkConnection(
            Secret("postgresql://app:pw@db/shop"), "best", PostgresSinkMode.UPSERT, key=("auction",)
        ),
    )
"""

from __future__ import annotations

from spate.protocol.kafka import KafkaSinkConnection, KafkaSinkEnvelope, kafka_client_settings
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import (
    ParquetSinkConnection,
    PostgresSinkConnection,
    PostgresSinkMode,
    SinkConnection,
)

__all__ = [
    "KafkaSinkConnection",
    "KafkaSinkEnvelope",
    "ParquetSinkConnection",
    "PostgresSinkConnection",
    "PostgresSinkMode",
    "Secret",
    "SinkConnection",
    "kafka_client_settings",
]
