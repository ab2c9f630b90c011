"""What the storage controller is asked to create: collection and export descriptions.

A **collection** has a schema and a *data source* saying who writes it:

* :class:`IngestionSource` — the ingestion's own collection, which is also its remap (progress)
  collection: the source's resume point at every time. It names its ``exports`` (collections
  with :class:`IngestionExport`) and the storage instance that runs it;
* :class:`IngestionExport` — one output of an ingestion (a table upstream, a generator output);
* :class:`TableSource` — a table, written by :meth:`StorageController.append`;
* :class:`IntrospectionSource` — a storage-managed collection (status history, statistics…)
  written by the controller's collection manager;
* :class:`OtherSource` — written by someone else (a compute replica's materialized view).

An **export** (a sink) writes one collection to an external system; :class:`ExportDescription`
names the storage instance that runs it and where it writes.

All are frozen wire types: the controller keeps them in its durable metadata, so a restarted
controller restores every collection and export.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, InstanceId
from spate.protocol.kafka import KafkaSinkConnection, KafkaSource
from spate.protocol.mysql import MySqlSource
from spate.protocol.storage_desc import (
    FileSource,
    LoadGeneratorSource,
    ParquetSinkConnection,
    PostgresSinkConnection,
    PostgresSource,
)
from spate.repr.desc import RelationDesc
from spate.wire import wire


@wire("storage.controller.ingestion_source")
@dataclass(frozen=True, slots=True)
class IngestionSource:
    """The ingestion itself (and its remap collection), run on ``instance``.

    ``exports`` maps each export collection to the source output (``reference``) it receives.
    """

    instance: InstanceId
    connection: LoadGeneratorSource | PostgresSource | FileSource | KafkaSource | MySqlSource
    exports: dict[GlobalId, str]
    timestamp_interval_ms: int = 1000


@wire("storage.controller.ingestion_export")
@dataclass(frozen=True, slots=True)
class IngestionExport:
    """One output of ingestion ``ingestion``: its ``reference``."""

    ingestion: GlobalId
    reference: str


@wire("storage.controller.table_source")
@dataclass(frozen=True, slots=True)
class TableSource:
    """A table: written only through the controller's ``append``."""


class IntrospectionKind(enum.Enum):
    SOURCE_STATUS_HISTORY = "source_status_history"
    SINK_STATUS_HISTORY = "sink_status_history"
    SOURCE_STATISTICS = "source_statistics"
    SINK_STATISTICS = "sink_statistics"
    SHARD_MAPPING = "shard_mapping"
    FRONTIERS = "frontiers"
    # Written by the environment (see ``StorageController.set_introspection_provider``): what
    # the catalog, the compute controller and the orchestrator know, one row per object.
    OBJECTS = "objects"
    COLUMNS = "columns"
    CLUSTERS = "clusters"
    REPLICAS = "replicas"
    COLLECTION_FRONTIERS = "collection_frontiers"
    HYDRATION = "hydration"
    DATAFLOW_STATISTICS = "dataflow_statistics"
    SOURCE_SUMMARY = "source_summary"
    SINK_SUMMARY = "sink_summary"
    PEEKS = "peeks"
    SUBSCRIBES = "subscribes"
    ERRORS = "errors"
    PIPELINE_EXPECTATIONS = "pipeline_expectations"


@wire("storage.controller.introspection_source")
@dataclass(frozen=True, slots=True)
class IntrospectionSource:
    """A collection the controller's collection manager writes."""

    kind: IntrospectionKind


@wire("storage.controller.other_source")
@dataclass(frozen=True, slots=True)
class OtherSource:
    """Written outside the storage controller (e.g. a materialized view by compute)."""


DataSource = IngestionSource | IngestionExport | TableSource | IntrospectionSource | OtherSource


@wire("storage.controller.collection_description")
@dataclass(frozen=True, slots=True)
class CollectionDescription:
    """A collection to create: its schema, its data source, optionally an initial since.

    ``since`` (when given) is the earliest time the collection must stay readable from; the
    collection's since is the later of it and its shard's since.
    """

    desc: RelationDesc
    data_source: IngestionSource | IngestionExport | TableSource | IntrospectionSource | OtherSource
    since: Frontier | None = None

    @property
    def is_table(self) -> bool:
        return isinstance(self.data_source, TableSource)


@wire("storage.controller.export_description")
@dataclass(frozen=True, slots=True)
class ExportDescription:
    """A sink run on ``instance`` writing to ``connection``, optionally stopping at ``up_to``."""

    instance: InstanceId
    connection: ParquetSinkConnection | PostgresSinkConnection | KafkaSinkConnection
    with_snapshot: bool = True
    up_to: Frontier = Antichain.empty()


@dataclass(frozen=True, slots=True)
class CreateExportToken:
    """Proof of :meth:`StorageController.prepare_export`: a read hold on ``from_id`` at
    ``acquired_since``, held until :meth:`create_exports` or :meth:`cancel_prepare_export`."""

    id: GlobalId
    from_id: GlobalId
    acquired_since: Frontier
