"""The state of one compute instance, and the effects every part of it uses.

:class:`InstanceState` holds what an instance knows — its collections, replicas, pending peeks
and subscribes, the command history — and the effects that change it consistently: sending a
command to every replica (and recording it), issuing and applying read holds, delivering
responses, advancing a collection's write frontier. It emits actions into a list the driver
drains; no sockets, clocks or threads inside.

:class:`~spate.compute.controller.instance.Instance` is the entry points over it; the free
functions of :mod:`~spate.compute.controller.dataflows`,
:mod:`~spate.compute.controller.maintenance` and :mod:`~spate.compute.controller.peek_request`
take an ``InstanceState``, so none of them needs the ``Instance`` class.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Final

from spate.compute.controller.actions import (
    Action,
    DeliverPeekResult,
    DeliverResponse,
    SendCommand,
)
from spate.compute.controller.collection import (
    CollectionState,
    frontier_lt,
)
from spate.compute.controller.errors import (
    CollectionMissing,
    InstanceShutDown,
)
from spate.compute.controller.hydration import DEFAULT_HYDRATION_CONCURRENCY
from spate.compute.controller.peek import PeekTracker
from spate.compute.controller.replica import ReplicaHealth, ReplicaState
from spate.compute.controller.responses import (
    ComputeControllerResponse,
    FrontierUpper,
    PeekResult,
)
from spate.compute.controller.storage import StorageCollections
from spate.compute.controller.subscribe import SubscribeTracker
from spate.errors import FrontierError
from spate.frontier.antichain import Frontier, Timestamp
from spate.frontier.mutable import ChangeBatch
from spate.frontier.read_hold import ReadHold
from spate.ids import GlobalId, IdGen, InstanceId, PeekId, ReplicaId
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.compute import (
    AllowCompaction,
    ComputeCommand,
    ComputeParameters,
    CreateInstance,
    InitializationComplete,
    InstanceConfig,
    Peek,
    UpdateConfiguration,
)
from spate.protocol.history import ComputeCommandHistory
from spate.soft_assert import soft_assert

_log: Final = logging.getLogger("spate.compute.controller.instance")


class InstanceState:
    """What one compute instance knows, and the effects that change it (see module docs)."""

    def __init__(
        self,
        id: InstanceId,
        *,
        storage: StorageCollections,
        ids: IdGen,
        config: InstanceConfig,
        params: ComputeParameters | None = None,
        initialized: bool = False,
        read_only: bool = False,
        hydration_concurrency: int = DEFAULT_HYDRATION_CONCURRENCY,
        epoch_base: int = 0,
    ) -> None:
        self.id = id
        # Connection epochs of replicas are epoch_base + 1, + 2, … (one per (re)connection).
        self.epoch_base = epoch_base
        self.storage = storage
        self.config = config
        self.read_only = read_only
        self.hydration_concurrency = hydration_concurrency
        self.history = ComputeCommandHistory()
        self.replicas: dict[ReplicaId, ReplicaState] = {}
        self.collections: dict[GlobalId, CollectionState] = {}
        self.peeks = PeekTracker(id, self)
        self.subscribes = SubscribeTracker(id, self)
        self.initialized = False
        self.shut_down = False
        self._ids = ids
        self._actions: list[Action] = []
        # Called when a hold released outside any entry point (by a caller holding it) made
        # the instance emit actions, so that the driver carries them out at once.
        self.on_actions: Callable[[], None] | None = None
        self._pending_holds: dict[GlobalId, ChangeBatch[Timestamp]] = {}
        self._defer = 0
        # Collections not yet scheduled, and dropped ones not yet cleaned up (ordered sets).
        self.unscheduled: dict[GlobalId, None] = {}
        self.dropped: dict[GlobalId, None] = {}
        # Hello is specialised per connection (epoch, nonce) when sent.
        self.history.push(Hello(version=PROTOCOL_VERSION, epoch=0, nonce=b""))
        self.history.push(CreateInstance(config))
        if params is not None and not params.is_empty():
            self.history.push(UpdateConfiguration(params))
        if initialized:
            self.initialization_complete()

    # -- the driver's side ----------------------------------------------------------------------

    def drain(self) -> list[Action]:
        """Every action emitted since the last call, in order."""
        out, self._actions = self._actions, []
        return out

    def check_live(self) -> None:
        if self.shut_down:
            raise InstanceShutDown(self.id)

    # -- effects (used by the trackers) -----------------------------------------------------------

    def broadcast(self, command: ComputeCommand) -> None:
        self.history.push(command)
        for r in self.replicas.values():
            if r.health is not ReplicaHealth.FAILED:
                self._send(r, command)

    def deliver(self, response: ComputeControllerResponse) -> None:
        self._actions.append(DeliverResponse(response))

    def deliver_peek(self, uuid: PeekId, result: PeekResult) -> None:
        self._actions.append(DeliverPeekResult(self.id, uuid, result))

    def _send(self, r: ReplicaState, command: ComputeCommand) -> None:
        for c in r.gate.on_command(command):
            if isinstance(c, Peek):
                r.outstanding_peeks.add(c.uuid)
            self._actions.append(SendCommand(self.id, r.id, r.epoch, c))

    # -- read holds --------------------------------------------------------------------------------

    def hold_changes(self, id: GlobalId, changes: ChangeBatch[Timestamp]) -> None:
        """The issuer callback of every hold on this instance's collections."""
        if self.shut_down:
            return
        pending = self._pending_holds.get(id)
        if pending is None:
            self._pending_holds[id] = changes.copy()
        else:
            pending.extend(changes.items())
        if self._defer == 0:
            self._apply_pending_holds()
            if self._actions and self.on_actions is not None:
                self.on_actions()

    def issue_hold(self, c: CollectionState, since: Frontier) -> ReadHold:
        """A new hold on ``c`` at ``since`` (which MUST be at or beyond ``c``'s since)."""
        if not since.is_empty():
            c.read_capabilities.update_iter([(t, 1) for t in since])
        return ReadHold(c.id, since, self.hold_changes)

    def begin(self) -> None:
        """Start an entry point: hold changes are queued until :meth:`end`."""
        self._defer += 1

    def end(self) -> None:
        self._defer -= 1
        if self._defer == 0 and self._pending_holds:
            self._apply_pending_holds()

    def _apply_pending_holds(self) -> None:
        self._defer += 1
        try:
            pending = self._pending_holds
            while pending:
                id = next(iter(pending))
                self._apply_read_hold_change(id, pending.pop(id))
        finally:
            self._defer -= 1

    def _apply_read_hold_change(self, id: GlobalId, changes: ChangeBatch[Timestamp]) -> None:
        c = self.collections.get(id)
        if c is None:
            soft_assert(changes.is_empty(), f"read hold changes {changes} for unknown {id}")
            return
        try:
            moved = c.read_capabilities.update_iter(changes)
        except FrontierError as e:
            soft_assert(False, f"read hold changes for collection {id} rejected: {e}")
            return
        if moved.is_empty():
            return
        since = c.read_capabilities.frontier()
        for hold in c.storage_dependencies.values():
            hold.try_downgrade(since)
        for hold in c.compute_dependencies.values():
            hold.try_downgrade(since)
        if not c.as_of.is_empty():
            self.broadcast(AllowCompaction(id, since))
        if since.is_empty():
            self.unscheduled.pop(id, None)

    # -- configuration and collections ------------------------------------------------------------

    def initialization_complete(self) -> None:
        if not self.initialized:
            self.initialized = True
            self.broadcast(InitializationComplete())

    def collection(self, id: GlobalId) -> CollectionState:
        """The live (not dropped) collection ``id``, or ``CollectionMissing``."""
        c = self.collections.get(id)
        if c is None or c.dropped:
            raise CollectionMissing(id, self.id)
        return c

    def update_write_frontier(self, c: CollectionState, upper: Frontier) -> None:
        """Advance the global write frontier (the fastest replica wins) and the implied hold."""
        if not frontier_lt(c.write_frontier, upper):
            return
        c.write_frontier = upper
        if c.dropped:
            return
        if c.read_policy is not None:
            c.advance_implied(c.read_policy.frontier(upper))
        else:
            c.advance_implied(upper.step_back())
        self.deliver(FrontierUpper(self.id, c.id, upper))

    def mark_dropped(self, c: CollectionState) -> None:
        """``c`` is dropped: no reads, no output forwarded, its implied and warmup holds go;
        its state stays until nothing holds it and every replica reported every frontier as
        ``{}`` (maintenance removes it)."""
        c.dropped = True
        self.dropped[c.id] = None
        self.unscheduled.pop(c.id, None)
        self.subscribes.remove(c.id)
        c.release_own_hold()

    def drop_if_compacted_away(self, c: CollectionState) -> None:
        """A read policy set to compact ``c`` to ``{}`` drops it: nobody may read it again."""
        if not c.dropped and c.read_policy is not None and c.implied.is_empty():
            self.mark_dropped(c)

    def live_collections(self) -> Iterable[CollectionState]:
        return (c for c in self.collections.values() if not c.dropped)
