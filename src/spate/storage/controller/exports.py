"""Exports (sinks) in the storage controller's state: prepare, install, drop (pure).

* ``prepare(id, from_id)`` holds ``from_id`` at its implied capability and returns a
  :class:`~spate.storage.controller.types.CreateExportToken`; ``cancel_prepare`` releases the
  hold.
* ``validate_create`` checks a ``create_exports`` call whole (``SinkIdReused``,
  ``ExportInstanceMissing``, ``IdentifierMissing``) before the driver records each as_of (the
  acquired since) in the durable metadata; then ``install`` sends ``RunSink``. From then on the
  export's read capability on its input follows ``step_back(write frontier)``: the input stays
  readable where the sink resumes.
* ``drop`` releases that hold, stops the sink and records ``dropped``; the durable record goes
  at the next flush (``ForgetExports``). The driver's ``open`` restores every recorded export
  with ``restore``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from spate.frontier.antichain import Frontier
from spate.frontier.mutable import ChangeBatch
from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.protocol.storage import ObjectStatus, RunIngestion, RunSink
from spate.protocol.storage_desc import SinkDescription
from spate.storage.controller.collections import Capabilities, CollectionState, ExportState
from spate.storage.controller.errors import (
    ExportInstanceMissing,
    IdentifierMissing,
    SinkIdReused,
)
from spate.storage.controller.types import CreateExportToken, ExportDescription

_log: Final = logging.getLogger("spate.storage.controller")


class ExportHost(Protocol):
    """What exports need of the controller state that owns them
    (:class:`~spate.storage.controller.state.StorageState`)."""

    @property
    def caps(self) -> Capabilities: ...

    @property
    def instances(self) -> Mapping[InstanceId, object]: ...

    @property
    def object_instance(self) -> dict[GlobalId, InstanceId]: ...

    @property
    def collection_instance(self) -> dict[GlobalId, InstanceId]: ...

    def live(self, id: GlobalId) -> CollectionState: ...

    def run(self, instance: InstanceId, command: RunIngestion | RunSink) -> None: ...

    def status_row(
        self,
        id: GlobalId,
        status: ObjectStatus,
        error: str | None,
        replica: ReplicaId | None = None,
        hints: tuple[str, ...] = (),
    ) -> None: ...

    def forget_exports(self, ids: Sequence[GlobalId]) -> None: ...


class Exports:
    """The exports of one storage controller state (module docs)."""

    def __init__(self, state: ExportHost) -> None:
        self._state = state

    def get(self, id: GlobalId) -> ExportState:
        """A live export (``IdentifierMissing`` if unknown or dropped)."""
        export = self._state.caps.exports.get(id)
        if export is None or export.dropped:
            raise IdentifierMissing(id, "export")
        return export

    def prepare(self, id: GlobalId, from_id: GlobalId) -> CreateExportToken:
        """Hold ``from_id`` at its implied capability for export ``id``."""
        caps = self._state.caps
        if id in caps.exports or id in caps.collections:
            raise SinkIdReused(id)
        state = self._state.live(from_id)
        since = state.implied_capability.join(state.since)
        if since.is_empty():
            raise IdentifierMissing(from_id)
        caps.update_read_capabilities({from_id: ChangeBatch([(t, 1) for t in since])})
        return CreateExportToken(id, from_id, since)

    def cancel_prepare(self, token: CreateExportToken) -> None:
        self._state.caps.update_read_capabilities(
            {token.from_id: ChangeBatch([(t, -1) for t in token.acquired_since])}
        )

    def validate_create(
        self, exports: Sequence[tuple[CreateExportToken, ExportDescription]]
    ) -> None:
        """Check a whole ``create_exports`` call; raise before anything changes."""
        caps = self._state.caps
        seen: set[GlobalId] = set()
        for token, description in exports:
            if token.id in seen or token.id in caps.exports:
                raise SinkIdReused(token.id)
            seen.add(token.id)
            if description.instance not in self._state.instances:
                raise ExportInstanceMissing(description.instance, token.id)
            if token.from_id not in caps.collections:
                raise IdentifierMissing(token.from_id)

    def restore(
        self, id: GlobalId, from_id: GlobalId, description: ExportDescription, as_of: Frontier
    ) -> bool:
        """Re-install an export recorded durably; ``False`` if its input no longer exists."""
        if from_id not in self._state.caps.collections:
            _log.warning("export %s reads %s, which no longer exists; not restored", id, from_id)
            return False
        (hold,) = self._state.caps.acquire_read_holds([from_id])
        token = CreateExportToken(id, from_id, hold.since)
        self.install(token, description, as_of=as_of.join(hold.since))
        return True

    def install(
        self, token: CreateExportToken, description: ExportDescription, *, as_of: Frontier
    ) -> None:
        """Track the export (its hold on the input becomes its read capability) and run it."""
        state = self._state
        state.caps.add_export(
            token.id, token.from_id, description, as_of=as_of, acquired_since=token.acquired_since
        )
        from_state = state.caps.collections[token.from_id]
        sink = SinkDescription(
            token.from_id,
            from_state.shard,
            from_state.description.desc,
            description.connection,
            as_of,
            description.with_snapshot,
            description.up_to,
        )
        state.object_instance[token.id] = description.instance
        state.collection_instance[token.id] = description.instance
        state.run(description.instance, RunSink(token.id, sink))

    def drop(self, ids: Sequence[GlobalId], *, validate: bool = True) -> None:
        """Release each export's hold on its input, stop it, record ``dropped``. Unknown or
        dropped ids raise ``IdentifierMissing``, unless not ``validate`` (skipped)."""
        if validate:
            for id in ids:
                self.get(id)
        caps = self._state.caps
        for id in ids:
            export = caps.exports.get(id)
            if export is None or export.dropped:
                continue
            caps.drop_export(id)
            self._state.status_row(id, ObjectStatus.DROPPED, None)

    def forget_dropped(self) -> None:
        """Dropped exports leave the state (their durable records go: ``ForgetExports``)."""
        done = [id for id, e in self._state.caps.exports.items() if e.dropped]
        if done:
            self._state.forget_exports(done)
