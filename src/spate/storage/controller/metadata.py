"""The storage controller's durable metadata, one document in consensus.

``ControllerMetadata`` holds, for the deployment: the controller **epoch** (bumped by every
controller that opens it; the opaque of every critical since handle), every collection's
**shard** and description, every export's description and **as_of**, and the **unfinalized**
shards (dropped but not yet tombstoned). Each change is one compare-and-set of the whole
document, so "remove an id → shard mapping and add the shard to the unfinalized set" is atomic
(the first step of dropping a collection).

**Fencing:** every update checks that the stored epoch is still this controller's; a newer
controller makes it raise :class:`~spate.storage.controller.errors.ControllerFenced`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, ShardId
from spate.persist.document import DurableDocument
from spate.persist.location import Consensus
from spate.storage.controller.errors import ControllerFenced
from spate.storage.controller.types import CollectionDescription, ExportDescription
from spate.wire import wire

METADATA_KEY: Final = "storage-controller/metadata"


@wire("storage.controller.durable_collection")
@dataclass(frozen=True, slots=True)
class DurableCollection:
    shard: ShardId
    description: CollectionDescription


@wire("storage.controller.durable_export")
@dataclass(frozen=True, slots=True)
class DurableExport:
    from_id: GlobalId
    description: ExportDescription
    as_of: Frontier


@wire("storage.controller.metadata")
@dataclass(frozen=True, slots=True)
class ControllerMetadata:
    epoch: int = 0
    collections: dict[GlobalId, DurableCollection] = field(default_factory=dict)
    exports: dict[GlobalId, DurableExport] = field(default_factory=dict)
    unfinalized: tuple[ShardId, ...] = ()


class MetadataStore:
    """The metadata document, fenced by epoch (see the module docs)."""

    def __init__(self, consensus: Consensus, key: str = METADATA_KEY) -> None:
        self._doc = DurableDocument(consensus, key, ControllerMetadata)
        self._epoch: int | None = None

    @property
    def epoch(self) -> int:
        if self._epoch is None:
            raise RuntimeError("metadata store not opened")
        return self._epoch

    def open(self, epoch: int | None = None) -> ControllerMetadata:
        """Claim the metadata for a new controller epoch: ``epoch`` if given (it must be newer
        than the stored one, else ``ControllerFenced``), otherwise the stored epoch plus one."""

        def bump(current: ControllerMetadata | None) -> ControllerMetadata:
            current = current or ControllerMetadata()
            new = current.epoch + 1 if epoch is None else epoch
            if new <= current.epoch:
                raise ControllerFenced(new, current.epoch, "opening the storage metadata")
            return dataclasses.replace(current, epoch=new)

        meta = self._doc.update(bump)
        self._epoch = meta.epoch
        return meta

    def load(self) -> ControllerMetadata:
        meta = self._doc.load() or ControllerMetadata()
        self._check(meta)
        return meta

    def _check(self, meta: ControllerMetadata) -> None:
        if self._epoch is not None and meta.epoch != self._epoch:
            raise ControllerFenced(self._epoch, meta.epoch, "updating the storage metadata")

    def update(self, fn: Callable[[ControllerMetadata], ControllerMetadata]) -> ControllerMetadata:
        """Apply ``fn`` (pure) to the current metadata; fenced by epoch."""

        def checked(current: ControllerMetadata | None) -> ControllerMetadata:
            current = current or ControllerMetadata()
            self._check(current)
            return fn(current)

        return self._doc.update(checked)
