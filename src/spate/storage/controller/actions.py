"""What the storage controller's state asks its driver to do (the "out" side of sans-I/O).

:class:`~spate.storage.controller.state.StorageState` never touches a socket, a persist handle
or consensus: each of its entry points appends actions, which the driver drains and carries out
in order. Order matters: commands to one replica MUST be sent in the order they were emitted,
and a ``ConnectReplica`` precedes every ``SendCommand`` for that ``(replica, epoch)``; a
``DowngradeSince`` of a collection precedes the ``ForgetCollections`` that drops it.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, InstanceId, ReplicaId, ShardId
from spate.protocol.storage import StorageCommand
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.storage.controller.replica_client import StorageReplicaLocation
from spate.storage.controller.types import IntrospectionKind


@dataclass(frozen=True, slots=True)
class ConnectReplica:
    """Start a client for ``(replica, epoch)``: connect (retrying with backoff), send the
    commands that follow, report its responses tagged with ``epoch``."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    location: StorageReplicaLocation


@dataclass(frozen=True, slots=True)
class SendCommand:
    """Send ``command`` on the connection of ``(replica, epoch)`` (drop it if that epoch is
    gone: the replica is rehydrated from the history)."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    command: StorageCommand


@dataclass(frozen=True, slots=True)
class DisconnectReplica:
    """Stop the client of ``(replica, epoch)`` and close its connection."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int


@dataclass(frozen=True, slots=True)
class DowngradeSince:
    """Downgrade the critical since handle of collection ``id`` to ``since`` (fenced by the
    controller epoch)."""

    id: GlobalId
    since: Frontier


@dataclass(frozen=True, slots=True)
class ForgetCollections:
    """Collections whose since reached ``{}``: in one metadata update, remove their id → shard
    mappings and add their shards to the unfinalized set; release their persist handles; then
    finalize the unfinalized shards (``FinalizeShards``)."""

    collections: tuple[tuple[GlobalId, ShardId], ...]


@dataclass(frozen=True, slots=True)
class ForgetExports:
    """Dropped exports whose durable records go (one metadata update)."""

    ids: tuple[GlobalId, ...]


@dataclass(frozen=True, slots=True)
class FinalizeShards:
    """Finalize these unfinalized shards (no live collection uses them); report the ones done
    with :meth:`~spate.storage.controller.state.StorageState.finalized`."""

    shards: tuple[ShardId, ...]


@dataclass(frozen=True, slots=True)
class StartManaged:
    """Start writing storage-managed collection ``id`` (of ``kind``, on ``shard``)."""

    id: GlobalId
    kind: IntrospectionKind
    shard: ShardId
    desc: RelationDesc


@dataclass(frozen=True, slots=True)
class StopManaged:
    """Stop writing storage-managed collection ``id`` (it was dropped)."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class AppendManaged:
    """Append ``rows`` to the storage-managed collections of ``kind`` (status histories)."""

    kind: IntrospectionKind
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class SetManaged:
    """The desired contents of the storage-managed collections of ``kind`` are ``rows``."""

    kind: IntrospectionKind
    rows: tuple[Row, ...]


Action = (
    ConnectReplica
    | SendCommand
    | DisconnectReplica
    | DowngradeSince
    | ForgetCollections
    | ForgetExports
    | FinalizeShards
    | StartManaged
    | StopManaged
    | AppendManaged
    | SetManaged
)
