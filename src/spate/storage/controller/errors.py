"""The errors of the storage controller (spec §6.9). Every message starts with ``storage error:``.

Each public method validates its whole input before it changes anything; when it raises, nothing
changed (no persist write, no command sent). Errors name the ids and frontiers involved, and mix
in the matching built-in (``IdentifierMissing`` is a ``KeyError``), as in ibis.
"""

from __future__ import annotations

from collections.abc import Sequence

from spate.errors import SpateError, UsageError
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, InstanceId, ReplicaId


class StorageError(UsageError):
    """Root of the storage controller's errors."""

    def __init__(self, message: str) -> None:
        super().__init__(f"storage error: {message}")

    def __str__(self) -> str:  # KeyError subclasses would quote the message otherwise
        return str(self.args[0]) if self.args else ""


class CollectionIdReused(StorageError, ValueError):
    def __init__(self, id: GlobalId, reason: str = "") -> None:
        self.id = id
        extra = f": {reason}" if reason else ""
        super().__init__(f"collection identifier reused with a different description: {id}{extra}")


SourceIdReused = CollectionIdReused


class SinkIdReused(StorageError, ValueError):
    def __init__(self, id: GlobalId) -> None:
        self.id = id
        super().__init__(f"sink identifier was re-created: {id}")


class IdentifierMissing(StorageError, KeyError):
    def __init__(self, id: GlobalId, what: str = "collection") -> None:
        self.id = id
        super().__init__(f"{what} identifier is not present: {id}")


class IdentifierInvalid(StorageError, ValueError):
    def __init__(self, id: GlobalId, reason: str) -> None:
        self.id = id
        super().__init__(f"{id}: {reason}")


class UpdateBeyondUpper(StorageError, ValueError):
    def __init__(self, id: GlobalId, time: int, upper: Frontier) -> None:
        self.id, self.time, self.upper = id, time, upper
        super().__init__(
            f"append batch for {id} contained update at or beyond its upper: time {time}, "
            f"new upper {upper}"
        )


class UpdateNotBeyondLower(StorageError, ValueError):
    def __init__(self, id: GlobalId, time: int, lower: Frontier) -> None:
        self.id, self.time, self.lower = id, time, lower
        super().__init__(
            f"append batch for {id} contained update at {time}, before its current upper {lower}"
        )


class ReadBeforeSince(StorageError, ValueError):
    def __init__(self, id: GlobalId, as_of: int, since: Frontier) -> None:
        self.id, self.as_of, self.since = id, as_of, since
        super().__init__(
            f"read for {id} was at a timestamp before its since: as_of {as_of}, since {since}"
        )


class InvalidUppers(StorageError, ValueError):
    """Some appends found another upper than expected; ``uppers`` holds the current ones."""

    def __init__(self, uppers: Sequence[tuple[GlobalId, Frontier]]) -> None:
        self.uppers = tuple(uppers)
        listed = ", ".join(f"{id} (current upper {u})" for id, u in self.uppers)
        super().__init__(f"expected upper was different from the actual upper: {listed}")


class IngestionInstanceMissing(StorageError, KeyError):
    def __init__(self, instance: InstanceId, ingestion: GlobalId) -> None:
        self.instance, self.ingestion = instance, ingestion
        super().__init__(f"instance {instance} missing for ingestion {ingestion}")


class ExportInstanceMissing(StorageError, KeyError):
    def __init__(self, instance: InstanceId, export: GlobalId) -> None:
        self.instance, self.export = instance, export
        super().__init__(f"instance {instance} missing for export {export}")


class InstanceExists(StorageError, ValueError):
    def __init__(self, instance: InstanceId) -> None:
        super().__init__(f"storage instance {instance} already exists")


class InstanceMissing(StorageError, KeyError):
    def __init__(self, instance: InstanceId) -> None:
        super().__init__(f"storage instance {instance} does not exist")


class InstanceNotEmpty(StorageError, ValueError):
    def __init__(self, instance: InstanceId, objects: Sequence[GlobalId]) -> None:
        listed = ", ".join(str(o) for o in objects)
        super().__init__(f"storage instance {instance} still runs {listed}; drop them first")


class ReplicaExists(StorageError, ValueError):
    def __init__(self, instance: InstanceId, replica: ReplicaId) -> None:
        super().__init__(f"replica {replica} of storage instance {instance} already exists")


class ReplicaMissing(StorageError, KeyError):
    def __init__(self, instance: InstanceId, replica: ReplicaId) -> None:
        super().__init__(f"replica {replica} of storage instance {instance} does not exist")


class InvalidUsage(StorageError, ValueError):
    pass


class ReadOnly(StorageError, RuntimeError):
    def __init__(self) -> None:
        super().__init__("cannot write in read-only mode")


class ControllerFenced(SpateError):
    """A newer storage controller took over: this one MUST stop (spec §7.4 "halt")."""

    def __init__(self, epoch: int, current_epoch: int, where: str) -> None:
        self.epoch, self.current_epoch = epoch, current_epoch
        super().__init__(
            f"storage controller at epoch {epoch} fenced by envd at epoch {current_epoch} ({where})"
        )
