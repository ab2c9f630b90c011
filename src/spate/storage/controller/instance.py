"""A storage instance (cluster): its replicas, its command history, and who runs what (pure).

Every object of the instance (ingestions, sinks) runs on **one** replica: the one with the
lowest ``ReplicaId``; it moves only when the replica set changes. Commands go through the
instance's :class:`~spate.protocol.storage_history.StorageCommandHistory` (kept reduced) and
from there to the replica that runs their object; configuration, ``InitializationComplete`` and
``AllowWrites`` go to every replica.

A replica is (re)hydrated with a new connection epoch ``compose_epoch(controller epoch,
incarnation)``: ``Hello``, then the reduced history filtered to the objects it runs. A replica
that loses objects (a lower replica id appeared) is rehydrated so that it stops them (a
replica stops what the replayed history does not mention); a replica that gains objects gets
their ``Run*`` commands. A failed connection is rehydrated with the next incarnation.

Sans-I/O: the instance never opens a connection. It appends
:class:`~spate.storage.controller.actions.ConnectReplica`, ``SendCommand`` and
``DisconnectReplica`` actions to the list it was given, which the controller's driver carries
out in order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from spate.ids import GlobalId, IdGen, InstanceId, ReplicaId
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.epochs import compose_epoch
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    InitializationComplete,
    RunIngestion,
    RunSink,
    StorageCommand,
    UpdateConfiguration,
)
from spate.protocol.storage_history import StorageCommandHistory
from spate.storage.controller.actions import (
    Action,
    ConnectReplica,
    DisconnectReplica,
    SendCommand,
)
from spate.storage.controller.replica_client import StorageReplicaLocation

_log: Final = logging.getLogger("spate.storage.controller.instance")


@dataclass
class ReplicaState:
    id: ReplicaId
    location: StorageReplicaLocation
    incarnation: int = 0
    epoch: int = 0
    connected: bool = False
    failed: bool = False


class StorageInstance:
    """One storage instance of a controller (see the module docs). Event-loop thread only."""

    def __init__(
        self, id: InstanceId, *, controller_epoch: int, ids: IdGen, out: list[Action]
    ) -> None:
        self.id = id
        self._controller_epoch = controller_epoch
        self._ids = ids
        self._out = out
        self.history = StorageCommandHistory()
        self.replicas: dict[ReplicaId, ReplicaState] = {}
        self.objects: dict[GlobalId, frozenset[GlobalId]] = {}
        """Ingestion or sink id → every collection id it writes (for routing compactions)."""

    # -- ownership ------------------------------------------------------------------------------

    def owner(self) -> ReplicaId | None:
        return min(self.replicas) if self.replicas else None

    def _object_of(self, id: GlobalId) -> GlobalId | None:
        for obj, ids in self.objects.items():
            if id in ids:
                return obj
        return None

    # -- commands -------------------------------------------------------------------------------

    def send(self, command: StorageCommand) -> None:
        """Record ``command`` and send it where it belongs."""
        if isinstance(command, RunIngestion):
            self.objects[command.id] = frozenset(command.description.collection_ids(command.id))
        elif isinstance(command, RunSink):
            self.objects[command.id] = frozenset({command.id})
        self.history.push(command)
        if isinstance(command, (UpdateConfiguration, InitializationComplete, AllowWrites)):
            targets: Iterable[ReplicaState] = self.replicas.values()
        else:
            owner = self.owner()
            targets = [self.replicas[owner]] if owner is not None else []
        for r in targets:
            self._send(r, command)
        if isinstance(command, AllowCompaction) and command.frontier.is_empty():
            self.objects.pop(command.id, None)

    def runs(self, id: GlobalId) -> bool:
        """Whether an object of this instance writes collection ``id``."""
        return self._object_of(id) is not None

    # -- replicas -------------------------------------------------------------------------------

    def add_replica(self, replica: ReplicaId, location: StorageReplicaLocation) -> None:
        previous_owner = self.owner()
        self.replicas[replica] = ReplicaState(replica, location)
        self._hydrate(self.replicas[replica])
        if previous_owner is not None and self.owner() != previous_owner:
            # The objects move to the new lowest replica: the old owner must stop them.
            self._hydrate(self.replicas[previous_owner])

    def drop_replica(self, replica: ReplicaId) -> None:
        was_owner = self.owner() == replica
        state = self.replicas.pop(replica)
        self._out.append(DisconnectReplica(self.id, replica, state.epoch))
        new_owner = self.owner()
        if was_owner and new_owner is not None:
            self._hydrate(self.replicas[new_owner])

    def _send(self, r: ReplicaState, command: StorageCommand) -> None:
        self._out.append(SendCommand(self.id, r.id, r.epoch, command))

    def _hydrate(self, r: ReplicaState) -> None:
        if r.incarnation:
            self._out.append(DisconnectReplica(self.id, r.id, r.epoch))
        r.incarnation += 1
        r.epoch = compose_epoch(self._controller_epoch, r.incarnation)
        r.connected = False
        r.failed = False
        self._out.append(ConnectReplica(self.id, r.id, r.epoch, r.location))
        self._send(r, Hello(PROTOCOL_VERSION, r.epoch, self._ids.uuid().bytes))
        self.history.reduce()
        owner = self.owner()
        for command in self.history.commands_for(lambda _id: r.id == owner):
            self._send(r, command)

    def connected(self, replica: ReplicaId, epoch: int) -> None:
        r = self.replicas.get(replica)
        if r is not None and r.epoch == epoch:
            r.connected = True

    def failed(self, replica: ReplicaId, epoch: int) -> None:
        r = self.replicas.get(replica)
        if r is not None and r.epoch == epoch:
            r.failed = True
            r.connected = False

    def rehydrate_failed(self) -> list[ReplicaId]:
        """Reconnect every failed replica with its next incarnation."""
        out = []
        for r in self.replicas.values():
            if r.failed:
                _log.info("storage instance %s: rehydrating replica %s", self.id, r.id)
                self._hydrate(r)
                out.append(r.id)
        return out

    def current_epoch(self, replica: ReplicaId) -> int | None:
        r = self.replicas.get(replica)
        return None if r is None else r.epoch

    def close(self) -> None:
        """Disconnect every replica (the instance is dropped)."""
        for r in self.replicas.values():
            self._out.append(DisconnectReplica(self.id, r.id, r.epoch))
