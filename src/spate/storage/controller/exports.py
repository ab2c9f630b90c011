"""Exports (sinks) in the storage controller: prepare, create, restore, drop (spec §6.2).

Mixed into :class:`~spate.storage.controller.controller.StorageController`.

* ``prepare_export(id, from_id)`` holds ``from_id`` at its implied capability and returns a
  :class:`~spate.storage.controller.types.CreateExportToken`; ``cancel_prepare_export`` releases
  the hold.
* ``create_exports([(token, description)])`` validates every export (``SinkIdReused``,
  ``ExportInstanceMissing``, ``IdentifierMissing``), records each as_of (the acquired since) in
  the durable metadata, and sends ``RunSink``. From then on the export's read capability on its
  input follows ``step_back(write frontier)``: the input stays readable where the sink resumes.
* ``drop_sinks`` releases that hold, stops the sink and records ``dropped``; the durable record
  goes at the next flush. ``open`` restores every recorded export.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import Final

from spate.frontier.antichain import Frontier
from spate.frontier.mutable import ChangeBatch
from spate.ids import GlobalId, InstanceId
from spate.protocol.storage import ObjectStatus, RunIngestion, RunSink
from spate.protocol.storage_desc import SinkDescription
from spate.storage.controller.collections import CollectionState, ExportState
from spate.storage.controller.driver import ControllerDriver
from spate.storage.controller.errors import (
    ExportInstanceMissing,
    IdentifierMissing,
    SinkIdReused,
)
from spate.storage.controller.metadata import ControllerMetadata, DurableExport
from spate.storage.controller.types import CreateExportToken, ExportDescription

_log: Final = logging.getLogger("spate.storage.controller")


class ExportsApi(ControllerDriver):
    """The export methods of the storage controller (module docs)."""

    def _check_open(self) -> None:
        raise NotImplementedError

    def _live(self, id: GlobalId) -> CollectionState:
        raise NotImplementedError

    def _run(self, instance: InstanceId, command: RunIngestion | RunSink) -> None:
        raise NotImplementedError

    async def _restore_export(self, id: GlobalId, exp: DurableExport) -> None:
        from_state = self._caps.collections.get(exp.from_id)
        if from_state is None:
            _log.warning(
                "export %s reads %s, which no longer exists; not restored", id, exp.from_id
            )
            return
        (hold,) = self._caps.acquire_read_holds([exp.from_id])
        token = CreateExportToken(id, exp.from_id, hold.since)
        self._install_export(token, exp.description, as_of=exp.as_of.join(hold.since))

    def _install_export(
        self, token: CreateExportToken, description: ExportDescription, *, as_of: Frontier
    ) -> None:
        self._caps.add_export(
            token.id, token.from_id, description, as_of=as_of, acquired_since=token.acquired_since
        )
        from_state = self._caps.collections[token.from_id]
        sink = SinkDescription(
            token.from_id,
            from_state.shard,
            from_state.description.desc,
            description.connection,
            as_of,
            description.with_snapshot,
            description.up_to,
        )
        self._object_instance[token.id] = description.instance
        self._collection_instance[token.id] = description.instance
        self._run(description.instance, RunSink(token.id, sink))

    # -- exports ----------------------------------------------------------------------------------

    def export(self, id: GlobalId) -> ExportState:
        state = self._caps.exports.get(id)
        if state is None or state.dropped:
            raise IdentifierMissing(id, "export")
        return state

    def export_mut(self, id: GlobalId) -> ExportState:
        return self.export(id)

    def prepare_export(self, id: GlobalId, from_id: GlobalId) -> CreateExportToken:
        """Hold ``from_id`` at its implied capability for export ``id`` (spec §6.2)."""
        if id in self._caps.exports or id in self._caps.collections:
            raise SinkIdReused(id)
        state = self._live(from_id)
        since = state.implied_capability.join(state.since)
        if since.is_empty():
            raise IdentifierMissing(from_id)
        self._caps.update_read_capabilities({from_id: ChangeBatch([(t, 1) for t in since])})
        return CreateExportToken(id, from_id, since)

    def cancel_prepare_export(self, token: CreateExportToken) -> None:
        self._caps.update_read_capabilities(
            {token.from_id: ChangeBatch([(t, -1) for t in token.acquired_since])}
        )

    async def create_exports(
        self, exports: Sequence[tuple[CreateExportToken, ExportDescription]]
    ) -> None:
        """Create sinks from prepared tokens: record each as_of durably, send ``RunSink``."""
        self._check_open()
        seen: set[GlobalId] = set()
        for token, description in exports:
            if token.id in seen or token.id in self._caps.exports:
                raise SinkIdReused(token.id)
            seen.add(token.id)
            if description.instance not in self._instances:
                raise ExportInstanceMissing(description.instance, token.id)
            if token.from_id not in self._caps.collections:
                raise IdentifierMissing(token.from_id)

        def add(meta: ControllerMetadata) -> ControllerMetadata:
            exps = dict(meta.exports)
            for token, description in exports:
                exps[token.id] = DurableExport(token.from_id, description, token.acquired_since)
            return dataclasses.replace(meta, exports=exps)

        await asyncio.to_thread(self._meta.update, add)
        for token, description in exports:
            self._install_export(token, description, as_of=token.acquired_since)

    def drop_sinks(self, ids: Sequence[GlobalId]) -> None:
        """Release each export's hold on its input, stop it, record ``dropped``."""
        for id in ids:
            self.export(id)
        self._drop_exports(ids)

    def drop_sinks_unvalidated(self, ids: Sequence[GlobalId]) -> None:
        self._drop_exports(
            [id for id in ids if id in self._caps.exports and not self._caps.exports[id].dropped]
        )

    def _drop_exports(self, ids: Sequence[GlobalId]) -> None:
        for id in ids:
            self._caps.drop_export(id)
            self._status_row(id, ObjectStatus.DROPPED, None)
