"""Errors of the controllers: instances, replicas, collections and their frontiers.

The storage and the compute controller raise the same errors for the same mistakes (an unknown
instance is :class:`InstanceMissing` on either side). Every method validates its whole input
before it changes anything, so a call that raised changed nothing. Messages name the instance,
replica or collection and the frontiers involved, and start with what went wrong
("collection does not exist: u42").

Ids and frontiers are typed ``object`` here: this module sits below :mod:`spate.ids` and
:mod:`spate.frontier`, which raise the roots of this package.
"""

from __future__ import annotations

from collections.abc import Sequence

from spate.errors._roots import UsageError


class ControllerError(UsageError):
    """Root of the controllers' usage errors. The failed call changed nothing."""

    def __str__(self) -> str:  # KeyError subclasses would quote the message otherwise
        return str(self.args[0]) if self.args else ""


class InstanceMissing(ControllerError, KeyError):
    """No instance (cluster) with this id."""

    def __init__(self, instance: object) -> None:
        self.instance = instance
        super().__init__(f"instance does not exist: {instance}")


class InstanceExists(ControllerError, ValueError):
    """An instance with this id exists already."""

    def __init__(self, instance: object) -> None:
        self.instance = instance
        super().__init__(f"instance exists already: {instance}")


class InstanceNotEmpty(ControllerError, ValueError):
    """Dropping an instance that still has replicas or runs collections: drop them first."""

    def __init__(self, instance: object, remaining: Sequence[object]) -> None:
        self.instance = instance
        self.remaining = tuple(remaining)
        listed = ", ".join(str(x) for x in self.remaining)
        super().__init__(f"instance {instance} is not empty: drop {listed} first")


class InstanceShutDown(ControllerError, RuntimeError):
    """A call after the controller (or this instance) was shut down."""

    def __init__(self, instance: object | None = None) -> None:
        what = f"instance {instance}" if instance is not None else "compute controller"
        super().__init__(f"{what} has been shut down")


class ReplicaExists(ControllerError, ValueError):
    """A replica of this name exists already in the instance."""

    def __init__(self, instance: object, replica: object) -> None:
        self.instance = instance
        self.replica = replica
        super().__init__(f"replica exists already: {replica} (instance {instance})")


class ReplicaMissing(ControllerError, KeyError):
    """The instance has no replica of this name."""

    def __init__(self, instance: object, replica: object) -> None:
        self.instance = instance
        self.replica = replica
        super().__init__(f"replica does not exist: {replica} (instance {instance})")


class CollectionMissing(ControllerError, KeyError):
    """No collection with this id (on this instance)."""

    sqlstate = "42P01"

    def __init__(self, id: object, instance: object | None = None) -> None:
        self.id = id
        self.instance = instance
        where = f" (instance {instance})" if instance is not None else ""
        super().__init__(f"collection does not exist: {id}{where}")


class MissingAsOf(ControllerError, ValueError):
    """A dataflow handed to a controller without an ``as_of``."""

    def __init__(self, exports: Sequence[object]) -> None:
        ids = ", ".join(str(i) for i in exports)
        super().__init__(f"dataflow definition lacks an as_of value (exports: {ids})")


class EmptyAsOfForSubscribe(ControllerError, ValueError):
    """A subscribe whose ``as_of`` is the empty frontier: it could never produce output."""

    def __init__(self, id: object) -> None:
        self.id = id
        super().__init__(f"subscribe {id} has an empty as_of: it could never produce output")


class SinceViolation(ControllerError, ValueError):
    """Something asked for a time that a collection has already compacted away: a time not
    beyond its ``since``. ``id`` names the collection and ``since`` its read frontier."""

    id: object
    since: object


class ReadBeforeSince(SinceViolation):
    """A read at a time that is not beyond the ``since`` of what it reads.

    ``timestamp`` is ``None`` when the collection cannot be read at any time any more (its
    since is the empty frontier: it was dropped)."""

    sqlstate = "55000"

    def __init__(
        self, id: object, *, since: object, timestamp: int | None, detail: str = ""
    ) -> None:
        self.id = id
        self.since = since
        self.timestamp = timestamp
        if timestamp is None:
            message = f"{id} can no longer be read (its since is {since})"
        else:
            message = f"read of {id} at {timestamp} is before its since {since}"
        super().__init__(f"{message}: {detail}" if detail else message)


class PeekSinceViolation(ReadBeforeSince):
    """A peek whose timestamp is not beyond the since of the collection it reads."""

    def __init__(self, id: object, *, since: object, timestamp: int) -> None:
        super().__init__(id, since=since, timestamp=timestamp)


class DataflowSinceViolation(SinceViolation):
    """A dataflow whose ``as_of`` is not beyond the since of one of its inputs."""

    def __init__(self, id: object, *, since: object, as_of: object) -> None:
        self.id = id
        self.since = since
        self.as_of = as_of
        super().__init__(
            f"dataflow has an as_of not beyond the since of collection: {id} "
            f"(since {since}, as_of {as_of})"
        )


class UpdateBeyondUpper(ControllerError, ValueError):
    """A write holds an update at or beyond the upper it promises (its ``new_upper``)."""

    def __init__(self, what: object, time: int, upper: object) -> None:
        self.what, self.time, self.upper = what, time, upper
        super().__init__(f"{what}: update at time {time} is at or beyond the new upper {upper}")


class UpdateNotBeyondLower(ControllerError, ValueError):
    """A write holds an update before its lower (the upper it expects to extend)."""

    def __init__(self, what: object, time: int, lower: object) -> None:
        self.what, self.time, self.lower = what, time, lower
        super().__init__(f"{what}: update at time {time} is not beyond lower {lower}")


class PeekTargetInvalid(ControllerError, ValueError):
    """An index peek whose target is not an index export (a sink has no arrangement)."""

    def __init__(self, id: object, reason: str) -> None:
        self.id = id
        super().__init__(f"cannot peek collection {id} as an index: {reason}")


class InvalidPeek(ControllerError, ValueError):
    """A peek with an impossible timestamp or empty key constraints."""


class PeekExists(ControllerError, ValueError):
    """A peek id that is already pending on the instance."""

    def __init__(self, uuid: object, instance: object) -> None:
        self.uuid = uuid
        super().__init__(f"peek {uuid} is already pending on instance {instance}")


class WriteOnlyCollection(ControllerError, ValueError):
    """A read policy for a collection nobody reads (a sink export)."""

    def __init__(self, id: object) -> None:
        self.id = id
        super().__init__(f"collection is write-only: {id} (sink exports take no read policy)")


class HydrationCheckBadTarget(ControllerError, ValueError):
    """A hydration check that names replicas the instance does not have."""

    def __init__(self, instance: object, replicas: Sequence[object]) -> None:
        ids = ", ".join(str(r) for r in replicas) or "none"
        super().__init__(
            f"No replicas found in cluster for target list. (instance {instance}, asked: {ids})"
        )
