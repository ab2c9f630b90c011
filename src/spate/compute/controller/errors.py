"""Errors of the compute controller (spec §5.16).

Every public method of :class:`~spate.compute.controller.ComputeController` validates its whole
input before it changes anything, and raises one of the narrow errors below; a call that raised
changed nothing. Messages name the instance, replica or collection and the frontiers involved,
and start with the spec's wording ("collection does not exist: u42").

=============================  ===========================================================
raised by                      errors
=============================  ===========================================================
``create_instance``            ``InstanceExists``
``drop_instance``              ``InstanceMissing``, ``InstanceNotEmpty``
``add_replica_to_instance``    ``InstanceMissing``, ``ReplicaExists``
``drop_replica``               ``InstanceMissing``, ``ReplicaMissing``
``create_dataflow``            ``InstanceMissing``, ``ReplicaMissing``, ``MissingAsOf``,
                               ``EmptyAsOfForSubscribe``, ``CollectionMissing``,
                               ``DataflowSinceViolation``, ``InvalidDataflow``
``drop_collections``           ``InstanceMissing``, ``CollectionMissing``
``peek``                       ``InstanceMissing``, ``ReplicaMissing``, ``CollectionMissing``,
                               ``PeekSinceViolation``, ``PeekTargetInvalid``, ``PeekExists``
``set_read_policy``            ``InstanceMissing``, ``CollectionMissing``,
                               ``WriteOnlyCollection``
``acquire_read_hold``          ``InstanceMissing``, ``CollectionMissing``
``collection_frontiers`` …     ``InstanceMissing``, ``CollectionMissing``
``collections_hydrated_for…``  ``InstanceMissing``, ``HydrationCheckBadTarget``
any call after ``shutdown``    ``InstanceShutDown``
=============================  ===========================================================
"""

from __future__ import annotations

from typing import Final

from spate.errors import UsageError
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId

ERROR_TARGET_REPLICA_FAILED: Final = "target replica failed or was dropped"
"""The error a targeted peek or subscribe gets when its replica fails or is dropped."""


class ComputeControllerError(UsageError):
    """Root of the compute controller's usage errors. The failed call changed nothing."""

    def __str__(self) -> str:  # KeyError subclasses would quote the message otherwise
        return str(self.args[0]) if self.args else ""


class InstanceMissing(ComputeControllerError, KeyError):
    def __init__(self, instance: InstanceId) -> None:
        self.instance = instance
        super().__init__(f"instance does not exist: {instance}")


class InstanceExists(ComputeControllerError, ValueError):
    def __init__(self, instance: InstanceId) -> None:
        self.instance = instance
        super().__init__(f"instance exists already: {instance}")


class InstanceNotEmpty(ComputeControllerError, ValueError):
    """``drop_instance`` of an instance that still has replicas or collections."""

    def __init__(
        self, instance: InstanceId, replicas: list[ReplicaId], collections: list[GlobalId]
    ) -> None:
        self.instance = instance
        r = ", ".join(str(x) for x in replicas) or "none"
        c = ", ".join(str(x) for x in collections) or "none"
        super().__init__(
            f"instance {instance} is not empty: drop its replicas ({r}) and collections ({c}) first"
        )


class InstanceShutDown(ComputeControllerError, RuntimeError):
    def __init__(self, instance: InstanceId | None = None) -> None:
        what = f"instance {instance}" if instance is not None else "compute controller"
        super().__init__(f"{what} has been shut down")


class CollectionMissing(ComputeControllerError, KeyError):
    def __init__(self, id: GlobalId, instance: InstanceId | None = None) -> None:
        self.id = id
        self.instance = instance
        where = f" (instance {instance})" if instance is not None else ""
        super().__init__(f"collection does not exist: {id}{where}")


class ReplicaExists(ComputeControllerError, ValueError):
    def __init__(self, instance: InstanceId, replica: ReplicaId) -> None:
        self.instance = instance
        self.replica = replica
        super().__init__(f"replica exists already: {replica} (instance {instance})")


class ReplicaMissing(ComputeControllerError, KeyError):
    def __init__(self, instance: InstanceId, replica: ReplicaId) -> None:
        self.instance = instance
        self.replica = replica
        super().__init__(f"replica does not exist: {replica} (instance {instance})")


class MissingAsOf(ComputeControllerError, ValueError):
    def __init__(self, exports: tuple[GlobalId, ...]) -> None:
        ids = ", ".join(str(i) for i in exports)
        super().__init__(f"dataflow definition lacks an as_of value (exports: {ids})")


class EmptyAsOfForSubscribe(ComputeControllerError, ValueError):
    def __init__(self, id: GlobalId) -> None:
        self.id = id
        super().__init__(f"subscribe {id} has an empty as_of: it could never produce output")


class InvalidDataflow(ComputeControllerError, ValueError):
    """The dataflow description is malformed (duplicate export, unordered objects…)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid dataflow: {reason}")


class SinceViolation(ComputeControllerError, ValueError):
    """A read was asked for at a time the collection has already compacted away."""

    id: GlobalId
    since: Frontier


class DataflowSinceViolation(SinceViolation):
    def __init__(self, id: GlobalId, *, since: Frontier, as_of: Frontier) -> None:
        self.id = id
        self.since = since
        self.as_of = as_of
        super().__init__(
            f"dataflow has an as_of not beyond the since of collection: {id} "
            f"(since {since}, as_of {as_of})"
        )


class PeekSinceViolation(SinceViolation):
    def __init__(self, id: GlobalId, *, since: Frontier, timestamp: int) -> None:
        self.id = id
        self.since = since
        self.timestamp = timestamp
        super().__init__(
            f"peek timestamp is not beyond the since of collection: {id} "
            f"(since {since}, timestamp {timestamp})"
        )


class PeekTargetInvalid(ComputeControllerError, ValueError):
    """An index peek whose target is not an index export (a sink has no arrangement)."""

    def __init__(self, id: GlobalId, reason: str) -> None:
        self.id = id
        super().__init__(f"cannot peek collection {id} as an index: {reason}")


class InvalidPeek(ComputeControllerError, ValueError):
    """A peek with an impossible timestamp or empty key constraints."""


class PeekExists(ComputeControllerError, ValueError):
    def __init__(self, uuid: PeekId, instance: InstanceId) -> None:
        self.uuid = uuid
        super().__init__(f"peek {uuid} is already pending on instance {instance}")


class WriteOnlyCollection(ComputeControllerError, ValueError):
    def __init__(self, id: GlobalId) -> None:
        self.id = id
        super().__init__(f"collection is write-only: {id} (sink exports take no read policy)")


class HydrationCheckBadTarget(ComputeControllerError, ValueError):
    def __init__(self, instance: InstanceId, replicas: list[ReplicaId]) -> None:
        ids = ", ".join(str(r) for r in replicas) or "none"
        super().__init__(
            f"No replicas found in cluster for target list. (instance {instance}, asked: {ids})"
        )
