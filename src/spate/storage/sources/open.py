"""Opening the reader of an ingestion description, and the schema of its progress rows.

The wire form of a source is :mod:`spate.protocol.storage_desc` (``LoadGeneratorSource``,
``PostgresSource``, ``FileSource``) plus the ingestion's exports; each export's ``reference``
names the reader output it receives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spate.protocol.kafka import KafkaSource
from spate.protocol.mysql import MySqlSource
from spate.protocol.storage_desc import (
    FileSource,
    IngestionDescription,
    LoadGenerator,
    LoadGeneratorSource,
    PostgresSource,
    SourceConnection,
)
from spate.repr.desc import RelationDesc
from spate.storage.sources.counter import CounterReader
from spate.storage.sources.files import (
    DEFAULT_SPARK_MIN_BYTES,
    FILES_PROGRESS_DESC,
    FilesReader,
)
from spate.storage.sources.loadgen import OFFSET_DESC
from spate.storage.sources.loadgen import LoadGenerator as LoadGeneratorReader
from spate.storage.sources.source import SourceError, SourceReader
from spate.storage.sources.stash import Stash

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def progress_desc(connection: SourceConnection) -> RelationDesc:
    """The schema of the remap (progress) collection of a source with ``connection``."""
    if isinstance(connection, LoadGeneratorSource):
        return OFFSET_DESC
    if isinstance(connection, PostgresSource):
        from spate.storage.sources.postgres.reader import LSN_DESC

        return LSN_DESC
    if isinstance(connection, FileSource):
        return FILES_PROGRESS_DESC
    if isinstance(connection, KafkaSource):
        from spate.storage.sources.kafka.reader import KAFKA_PROGRESS_DESC

        return KAFKA_PROGRESS_DESC
    if isinstance(connection, MySqlSource):
        from spate.storage.sources.mysql.reader import MYSQL_PROGRESS_DESC

        return MYSQL_PROGRESS_DESC
    raise SourceError(f"unknown source connection {type(connection).__name__}")


def load_generator(source: LoadGeneratorSource) -> LoadGeneratorReader:
    """The reader of a load generator (its outputs do not depend on any export)."""
    max_events = None if source.ticks is None else source.ticks * source.rows_per_tick
    common: dict[str, Any] = {
        "tick_ms": source.tick_interval_ms,
        "per_tick": source.rows_per_tick,
        "max_events": max_events,
    }
    match source.generator:
        case LoadGenerator.COUNTER:
            return CounterReader(max_cardinality=source.max_cardinality, **common)
        case LoadGenerator.AUCTION:
            from spate.storage.sources.auction import AuctionReader

            if source.base_time_ms is not None:
                common["base_time_us"] = source.base_time_ms * 1000
            return AuctionReader(seed=source.seed, **common)
        case LoadGenerator.TPCH:
            from spate.storage.sources.tpch import TpchReader

            if source.ticks is not None:  # the snapshot is an event of its own
                common["max_events"] = 1 + source.ticks * source.rows_per_tick
            return TpchReader(scale_factor=source.scale_factor, seed=source.seed, **common)
    raise SourceError(f"unknown load generator {source.generator!r}")


def open_reader(
    description: IngestionDescription,
    *,
    stash: Stash,
    spark: Callable[[], SparkSession] | None = None,
    max_files_per_poll: int = 1000,
    spark_min_bytes: int = DEFAULT_SPARK_MIN_BYTES,
) -> SourceReader[Any]:
    """A reader for ``description``: its outputs are the exports' references.

    Raises ``SourceError`` if an export names an output the source does not have or gives it a
    schema other than the source's.
    """
    connection = description.connection
    exports = {e.reference: e.desc for e in description.exports}
    reader: SourceReader[Any]
    if isinstance(connection, LoadGeneratorSource):
        reader = load_generator(connection)
    elif isinstance(connection, PostgresSource):
        from spate.storage.sources.postgres.reader import PostgresReader

        return PostgresReader(connection, exports, stash)
    elif isinstance(connection, FileSource):
        if len(exports) != 1:
            raise SourceError(f"a file source has one export, got {len(exports)}")
        ((reference, desc),) = exports.items()
        return FilesReader(
            connection,
            desc,
            output=reference,
            spark=spark,
            spark_min_bytes=spark_min_bytes,
            max_files_per_poll=max_files_per_poll,
        )
    elif isinstance(connection, KafkaSource):
        from spate.storage.sources.kafka.reader import KafkaReader

        reader = KafkaReader(connection)
    elif isinstance(connection, MySqlSource):
        from spate.storage.sources.mysql.reader import MySqlReader

        return MySqlReader(connection, exports, stash, stash_key=str(description.remap.shard))
    else:
        raise SourceError(f"unknown source connection {type(connection).__name__}")
    outputs = reader.outputs
    for reference, desc in exports.items():
        if reference not in outputs:
            raise SourceError(
                f"the source has no output {reference!r}; outputs: {', '.join(outputs)}"
            )
        if outputs[reference] != desc:
            raise SourceError(
                f"output {reference!r} has schema {outputs[reference]}, the export says {desc}"
            )
    return reader
