"""The errors of the storage controller. Its own errors' messages start with ``storage error:``;
the errors it shares with the compute controller (an unknown instance or replica, a read before
the since, an update outside a write's bounds) are :mod:`spate.errors`' and re-exported here.

Each public method validates its whole input before it changes anything; when it raises, nothing
changed (no persist write, no command sent). Errors name the ids and frontiers involved, and mix
in the matching built-in (``IdentifierMissing`` is a ``KeyError``), as in ibis.
"""

from __future__ import annotations

from collections.abc import Sequence

from spate.errors import InstanceExists as InstanceExists
from spate.errors import InstanceMissing as InstanceMissing
from spate.errors import InstanceNotEmpty as InstanceNotEmpty
from spate.errors import ReadBeforeSince as ReadBeforeSince
from spate.errors import ReplicaExists as ReplicaExists
from spate.errors import ReplicaMissing as ReplicaMissing
from spate.errors import SpateError, UsageError
from spate.errors import UpdateBeyondUpper as UpdateBeyondUpper
from spate.errors import UpdateNotBeyondLower as UpdateNotBeyondLower
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, InstanceId


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


class InvalidUsage(StorageError, ValueError):
    pass


class UnknownCollections(StorageError, ValueError):
    """``migrate_collections`` was not told about durable collections (it would finalize them)."""

    def __init__(self, ids: Sequence[GlobalId]) -> None:
        self.ids = tuple(ids)
        listed = ", ".join(str(i) for i in self.ids)
        super().__init__(
            f"durable collections not named in the migration: {listed}; finalizing them destroys "
            "their data (pass finalize_unknown=True to do so)"
        )


class ReadOnly(StorageError, RuntimeError):
    def __init__(self) -> None:
        super().__init__("cannot write in read-only mode")


class ControllerFenced(SpateError):
    """A newer storage controller took over: this one MUST stop (halt)."""

    def __init__(self, epoch: int, current_epoch: int, where: str) -> None:
        self.epoch, self.current_epoch = epoch, current_epoch
        super().__init__(
            f"storage controller at epoch {epoch} fenced by envd at epoch {current_epoch} ({where})"
        )
