"""The compute controller: instances, replicas, collections, read holds, peeks, subscribes.

:class:`ComputeController` is the API; each instance is a sans-I/O
:class:`Instance`; replicas are reached through :class:`ReplicaClient`\\ s; the storage side is
the :class:`StorageCollections` interface.
"""

from __future__ import annotations

from spate.compute.controller.controller import ComputeController
from spate.compute.controller.errors import (
    ERROR_TARGET_REPLICA_FAILED,
    CollectionMissing,
    ComputeControllerError,
    DataflowSinceViolation,
    EmptyAsOfForSubscribe,
    HydrationCheckBadTarget,
    InstanceExists,
    InstanceMissing,
    InstanceNotEmpty,
    InstanceShutDown,
    InvalidDataflow,
    InvalidPeek,
    MissingAsOf,
    PeekExists,
    PeekSinceViolation,
    PeekTargetInvalid,
    ReplicaExists,
    ReplicaMissing,
    SinceViolation,
    WriteOnlyCollection,
)
from spate.compute.controller.events import (
    ReplicaConnected,
    ReplicaEvent,
    ReplicaFailed,
    ReplicaResponse,
)
from spate.compute.controller.instance import Instance
from spate.compute.controller.introspection import (
    CollectionFrontiers,
    CollectionInfo,
    ReplicaFrontiers,
    ReplicaInfo,
)
from spate.compute.controller.replica import ReplicaConfig, ReplicaHealth, ReplicaLocation
from spate.compute.controller.replica_client import (
    ClientConnector,
    OpenConnection,
    ReplicaClient,
    ReplicaConnection,
    ReplicaConnector,
    ReplicaHandle,
)
from spate.compute.controller.responses import (
    ComputeControllerResponse,
    FrontierUpper,
    PeekFailed,
    PeekNotification,
    PeekOutcome,
    PeekResult,
    PeekSuccess,
    PeekWasCanceled,
    SubscribeResponse,
)
from spate.compute.controller.storage import (
    StorageCollectionMetadata,
    StorageCollections,
    StorageFrontiers,
)

__all__ = [
    "ERROR_TARGET_REPLICA_FAILED",
    "ClientConnector",
    "CollectionFrontiers",
    "CollectionInfo",
    "CollectionMissing",
    "ComputeController",
    "ComputeControllerError",
    "ComputeControllerResponse",
    "DataflowSinceViolation",
    "EmptyAsOfForSubscribe",
    "FrontierUpper",
    "HydrationCheckBadTarget",
    "Instance",
    "InstanceExists",
    "InstanceMissing",
    "InstanceNotEmpty",
    "InstanceShutDown",
    "InvalidDataflow",
    "InvalidPeek",
    "MissingAsOf",
    "OpenConnection",
    "PeekExists",
    "PeekFailed",
    "PeekNotification",
    "PeekOutcome",
    "PeekResult",
    "PeekSinceViolation",
    "PeekSuccess",
    "PeekTargetInvalid",
    "PeekWasCanceled",
    "ReplicaClient",
    "ReplicaConfig",
    "ReplicaConnected",
    "ReplicaConnection",
    "ReplicaConnector",
    "ReplicaEvent",
    "ReplicaExists",
    "ReplicaFailed",
    "ReplicaFrontiers",
    "ReplicaHandle",
    "ReplicaHealth",
    "ReplicaInfo",
    "ReplicaLocation",
    "ReplicaMissing",
    "ReplicaResponse",
    "SinceViolation",
    "StorageCollectionMetadata",
    "StorageCollections",
    "StorageFrontiers",
    "SubscribeResponse",
    "WriteOnlyCollection",
]
