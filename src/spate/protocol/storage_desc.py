"""What a storage replica runs: ingestion (source) and sink descriptions.

An **ingestion** reads one external system and writes one or more *export* collections, each
to its own persist shard, reclocked to spate timestamps. Its resume point lives in a
**remap** (progress) collection: the bindings ``source offset → timestamp`` (a PostgreSQL LSN,
the set of ingested files, a load generator's tick), so that after a restart the ingestion
resumes exactly at the shards' upper — no duplicate, no gap.

A **sink** writes the changes of one collection (``from_id``, read from persist shard
``from_shard``) to an external system from ``as_of`` on, exactly once across restarts: its
progress is committed with the data (a manifest in the Parquet directory, a progress row in
the same PostgreSQL transaction).

Secrets (connection strings) are :class:`~spate.protocol.secret.Secret` and never printed, or
:class:`~spate.protocol.secret.SecretRef` (the value kept in the replica's secrets directory,
out of every durable description).
Every type here is a frozen, registered wire type; bump its version when fields change.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from spate.errors import InvalidConnection
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, ShardId
from spate.protocol.kafka import KafkaSinkConnection, KafkaSource
from spate.protocol.mysql import MySqlSource
from spate.protocol.secret import Secret, SecretRef
from spate.repr.desc import RelationDesc
from spate.wire import wire

# --- collections ---------------------------------------------------------------------------


@wire("storage.collection_metadata")
@dataclass(frozen=True, slots=True)
class CollectionMetadata:
    """A storage collection as a replica sees it: its id, its persist shard and its schema."""

    id: GlobalId
    shard: ShardId
    desc: RelationDesc


@wire("storage.source_export")
@dataclass(frozen=True, slots=True)
class SourceExport:
    """One output collection of an ingestion.

    ``reference`` names what upstream feeds it: a load generator output (``"counter"``,
    ``"bids"``, ``"lineitem"``…), a PostgreSQL table (``"public.orders"``), or ``""`` for the
    single output of a file source. ``desc`` is the schema written to ``shard`` (without
    ``_time``/``_diff``). ``key``: column positions of the upstream primary key, when known
    (PostgreSQL tables), used to turn updates and deletes into retractions.
    """

    id: GlobalId
    reference: str
    shard: ShardId
    desc: RelationDesc
    key: tuple[int, ...] | None = None

    def metadata(self) -> CollectionMetadata:
        return CollectionMetadata(self.id, self.shard, self.desc)


# --- source connections ----------------------------------------------------------------------


class LoadGenerator(enum.Enum):
    """A built-in deterministic data generator."""

    COUNTER = "counter"
    """One output ``counter``: a single ``int64`` column, +1 per row, ``rows_per_tick`` rows
    per tick; with ``max_cardinality`` the oldest values are retracted beyond it."""
    AUCTION = "auction"
    """Nexmark-style ``persons``, ``auctions`` and ``bids``: of every 50 events 1 person,
    3 auctions, 46 bids; ``rows_per_tick`` events per tick."""
    TPCH = "tpch"
    """The TPC-H tables (``customer``, ``lineitem``, ``nation``, ``orders``, ``part``,
    ``partsupp``, ``region``, ``supplier``) at ``scale_factor``, emitted once, then updates to
    ``orders``/``lineitem`` at ``rows_per_tick`` per tick."""


@wire("storage.load_generator_source", 2)
@dataclass(frozen=True, slots=True)
class LoadGeneratorSource:
    """Generate data deterministically: the same ``seed`` gives the same rows at each tick.

    One tick every ``tick_interval_ms`` of wall-clock time; ``ticks`` stops after that many
    (``None``: never). The tick number is the resume point recorded in the remap collection.
    """

    generator: LoadGenerator
    seed: int = 0
    tick_interval_ms: int = 1000
    rows_per_tick: int = 1
    scale_factor: float = 0.01
    max_cardinality: int | None = None
    ticks: int | None = None
    base_time_ms: int | None = None
    """Event time of the first event (AUCTION's ``date_time``/``expires``), in ms since the
    epoch; ``None``: 2024-01-01. Part of the description, so replays stay deterministic."""

    def __post_init__(self) -> None:
        if self.tick_interval_ms <= 0:
            raise InvalidConnection(
                f"tick_interval_ms must be positive, got {self.tick_interval_ms}"
            )
        if self.rows_per_tick < 0:
            raise InvalidConnection(f"rows_per_tick must be >= 0, got {self.rows_per_tick}")
        if not self.scale_factor > 0:
            raise InvalidConnection(f"scale_factor must be positive, got {self.scale_factor}")
        if self.base_time_ms is not None and self.base_time_ms < 0:
            raise InvalidConnection(f"base_time_ms must be >= 0, got {self.base_time_ms}")

    def references(self) -> tuple[str, ...]:
        """The output names this generator can feed."""
        match self.generator:
            case LoadGenerator.COUNTER:
                return ("counter",)
            case LoadGenerator.AUCTION:
                return ("persons", "auctions", "bids")
            case LoadGenerator.TPCH:
                return (
                    "customer",
                    "lineitem",
                    "nation",
                    "orders",
                    "part",
                    "partsupp",
                    "region",
                    "supplier",
                )


@wire("storage.postgres_source")
@dataclass(frozen=True, slots=True)
class PostgresSource:
    """Change data capture from PostgreSQL logical replication (``pgoutput``).

    The replica takes an initial snapshot of every exported table (``SourceExport.reference``
    = ``"schema.table"``, which MUST be in ``publication`` and have a primary key or replica
    identity), then streams inserts, updates and deletes (as retractions) from replication
    ``slot``, resuming from the LSN recorded in the remap collection.
    """

    connection: Secret | SecretRef
    publication: str
    slot: str


class FileFormat(enum.Enum):
    PARQUET = "parquet"
    CSV = "csv"
    JSON = "json"


@wire("storage.file_source")
@dataclass(frozen=True, slots=True)
class FileSource:
    """Ingest the files of ``directory`` matching ``pattern`` as they appear, each exactly once.

    Files are read with Spark in ``format`` against the export's schema (CSV with a header row
    when ``csv_header``; JSON one object per line). A file MUST be complete when it appears
    (write elsewhere, then rename into the directory). The set of ingested file names is the
    resume point. Checked every ``poll_interval_ms``.
    """

    directory: str
    format: FileFormat
    pattern: str = "*"
    csv_header: bool = True
    poll_interval_ms: int = 1000


SourceConnection = LoadGeneratorSource | PostgresSource | FileSource | KafkaSource | MySqlSource


@wire("storage.ingestion")
@dataclass(frozen=True, slots=True)
class IngestionDescription:
    """An ingestion: its connection, its output collections and its remap collection.

    ``exports`` MUST be non-empty with distinct ids, shards and references; ``remap`` holds the
    ``offset → timestamp`` bindings (its id MAY be the ingestion's own id). Timestamps are
    assigned at most every ``timestamp_interval_ms``.
    """

    connection: LoadGeneratorSource | PostgresSource | FileSource | KafkaSource | MySqlSource
    exports: tuple[SourceExport, ...]
    remap: CollectionMetadata
    timestamp_interval_ms: int = 1000

    def __post_init__(self) -> None:
        if not self.exports:
            raise ValueError("an ingestion needs at least one export")
        for attr in ("id", "shard", "reference"):
            values = [getattr(e, attr) for e in self.exports]
            if len(set(values)) != len(values):
                raise ValueError(f"ingestion exports repeat a {attr}: {[str(v) for v in values]}")
        if self.remap.id in {e.id for e in self.exports}:
            raise ValueError(f"remap collection {self.remap.id} is also an export")
        if isinstance(self.connection, LoadGeneratorSource):
            known = self.connection.references()
            for e in self.exports:
                if e.reference not in known:
                    raise ValueError(
                        f"export {e.id}: {self.connection.generator.value} has no output "
                        f"{e.reference!r}; outputs: {', '.join(known)}"
                    )

    def collection_ids(self, ingestion_id: GlobalId) -> tuple[GlobalId, ...]:
        """Every collection this ingestion writes: itself, its exports, its remap collection."""
        ids = [ingestion_id, *(e.id for e in self.exports), self.remap.id]
        return tuple(dict.fromkeys(ids))


# --- sinks -----------------------------------------------------------------------------------


@wire("storage.parquet_sink")
@dataclass(frozen=True, slots=True)
class ParquetSinkConnection:
    """Write one Parquet file per closed interval ``[lower, upper)`` into ``directory``, with the
    data columns plus ``_time`` and ``_diff``, and a progress manifest naming the files and
    the sink's upper. A file is visible only once the manifest lists it."""

    directory: str


class PostgresSinkMode(enum.Enum):
    UPSERT = "upsert"
    """Keep the table equal to the collection: insert/update/delete by ``key``."""
    CHANGELOG = "changelog"
    """Append every update as a row with ``_time`` and ``_diff``."""


@wire("storage.postgres_sink")
@dataclass(frozen=True, slots=True)
class PostgresSinkConnection:
    """Write into PostgreSQL ``table``; each interval in one transaction that also records the
    sink's upper in ``progress_table`` (keyed by the sink id). ``key``: column names of the
    upsert key (required for ``UPSERT``, unused for ``CHANGELOG``)."""

    connection: Secret | SecretRef
    table: str
    mode: PostgresSinkMode
    key: tuple[str, ...] = ()
    progress_table: str = "spate_sink_progress"

    def __post_init__(self) -> None:
        if self.mode is PostgresSinkMode.UPSERT and not self.key:
            raise InvalidConnection(f"upsert sink into {self.table!r} needs a key")


SinkConnection = ParquetSinkConnection | PostgresSinkConnection | KafkaSinkConnection


@wire("storage.sink")
@dataclass(frozen=True, slots=True)
class SinkDescription:
    """Sink the collection ``from_id`` (persist shard ``from_shard``, schema ``from_desc``).

    The replica writes the changes at times ``>= as_of`` (the contents at ``as_of`` first when
    ``with_snapshot``), resuming after a restart from the progress committed in the external
    system, and stops once its frontier reaches ``up_to`` (``{}``: never).
    """

    from_id: GlobalId
    from_shard: ShardId
    from_desc: RelationDesc
    connection: ParquetSinkConnection | PostgresSinkConnection | KafkaSinkConnection
    as_of: Frontier
    with_snapshot: bool = True
    up_to: Frontier = Antichain.empty()
