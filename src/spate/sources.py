"""Where a source's data comes from: pass one of these to ``Environment.create_source``.

* :class:`LoadGeneratorSource` — a built-in deterministic generator (:class:`LoadGenerator`:
  ``COUNTER``, ``AUCTION``, ``TPCH``), for demos, tests and benchmarks.
* :class:`PostgresSource` — change data capture from PostgreSQL logical replication: a snapshot
  of every table of a publication, then its inserts, updates and deletes.
* :class:`KafkaSource` — the records of a Kafka topic (:class:`KafkaFormat`,
  :class:`KafkaEnvelope`), every partition, each record exactly once; client settings from
  :func:`kafka_client_settings`.
* :class:`MySqlSource` — change data capture from MariaDB's row-based binlog: a consistent
  snapshot of the tables, then their inserts, updates and deletes, resumed by GTID position;
  client settings from :func:`mysql_connection_settings`.
* :class:`FileSource` — every file that appears in a directory (:class:`FileFormat`: Parquet,
  CSV, JSON lines), each ingested exactly once.

Connection strings with a password go in a :class:`Secret`: spate keeps its value out of the
catalog and the logs.

Example::

    from spate.sources import LoadGenerator, LoadGeneratorSource

    env.create_source("auction", LoadGeneratorSource(LoadGenerator.AUCTION, rows_per_tick=50))
"""

from __future__ import annotations

from spate.protocol.kafka import KafkaEnvelope, KafkaFormat, KafkaSource, kafka_client_settings
from spate.protocol.mysql import MySqlSource, mysql_connection_settings
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import (
    FileFormat,
    FileSource,
    LoadGenerator,
    LoadGeneratorSource,
    PostgresSource,
    SourceConnection,
)

__all__ = [
    "FileFormat",
    "FileSource",
    "KafkaEnvelope",
    "KafkaFormat",
    "KafkaSource",
    "LoadGenerator",
    "LoadGeneratorSource",
    "MySqlSource",
    "PostgresSource",
    "Secret",
    "SourceConnection",
    "kafka_client_settings",
    "mysql_connection_settings",
]
