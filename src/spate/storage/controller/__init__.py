"""The storage controller: durable collections, ingestions, exports, tables."""

from __future__ import annotations

from spate.storage.controller.controller import StorageController
from spate.storage.controller.driver import FrontierUpdates
from spate.storage.controller.replica_client import StorageReplicaLocation, tcp_opener
from spate.storage.controller.types import (
    CollectionDescription,
    CreateExportToken,
    DataSource,
    ExportDescription,
    IngestionExport,
    IngestionSource,
    IntrospectionKind,
    IntrospectionSource,
    OtherSource,
    TableSource,
)
from spate.storage.interface import StorageCollectionMetadata, StorageFrontiers

__all__ = [
    "CollectionDescription",
    "CreateExportToken",
    "DataSource",
    "ExportDescription",
    "FrontierUpdates",
    "IngestionExport",
    "IngestionSource",
    "IntrospectionKind",
    "IntrospectionSource",
    "OtherSource",
    "StorageCollectionMetadata",
    "StorageController",
    "StorageFrontiers",
    "StorageReplicaLocation",
    "TableSource",
    "tcp_opener",
]
