"""A compute instance as a sans-I/O state machine.

Events in — API calls (``create_dataflow``, ``peek``, …), replica responses tagged
``(replica, epoch)`` (``handle_response``), replica connection events (``replica_connected``,
``replica_failed``), read-hold changes (the issuer callback of every hold it hands out) and
maintenance ticks (``maintain``). Actions out — commands for replicas, connect/disconnect
requests, responses and peek results for the caller — collected by :meth:`Instance.drain`.
No sockets, clocks, threads or futures inside: a driver (``ComputeController``) carries the
actions out.

Each entry point validates everything first; a call that raises changed nothing. Read-hold
changes arriving while an entry point runs are queued and applied when it ends, in order, so
the state is never observed half-updated.

Guarantees (checked by the scenario tests and the stateful property test):

* the since of a collection never passes an outstanding read hold, and neither the since nor
  the global write frontier ever regresses;
* every peek gets exactly one result; ``CancelPeek`` goes to every replica before the peek's
  read hold is released;
* a replica's response with a stale epoch is dropped; a response that breaks the protocol (a
  frontier regression, an unsolicited or duplicate peek response, a non-contiguous subscribe
  batch) is a *replica bug*: it is logged, the replica is disconnected and later rehydrated,
  and the instance's state is left as it was;
* the command history stays O(live dataflows + pending peeks).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Final

from spate.compute.controller import dataflows, maintenance
from spate.compute.controller.actions import (
    ConnectReplica,
    DisconnectReplica,
    SendCommand,
)
from spate.compute.controller.collection import (
    CollectionKind,
    CollectionState,
    ReplicaCollectionState,
    frontier_le,
)
from spate.compute.controller.errors import (
    ReplicaExists,
    ReplicaMissing,
)
from spate.compute.controller.hydration import HydrationGate
from spate.compute.controller.instance_state import InstanceState
from spate.compute.controller.peek_request import issue_peek
from spate.compute.controller.replica import ReplicaConfig, ReplicaHealth, ReplicaState
from spate.compute.controller.responses import (
    PeekResult,
)
from spate.frontier.antichain import Antichain, Frontier
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, PeekId, ReplicaId
from spate.persist import latency_trace
from spate.plan.dataflow import DataflowDescription
from spate.plan.finishing import RowSetFinishing
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.compute import (
    EVAL_ERROR_STATUS,
    EVAL_ERRORS_CLEARED,
    AllowWrites,
    ComputeParameters,
    ComputeResponse,
    CreateDataflow,
    CreateInstance,
    Frontiers,
    IndexTarget,
    PeekCanceled,
    PeekResponse,
    PersistTarget,
    StatisticsUpdates,
    Status,
    SubscribeBatch,
    SubscribeResponse,
    UpdateConfiguration,
    is_failed_status,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import Row

_log: Final = logging.getLogger("spate.compute.controller.instance")


class Instance(InstanceState):
    """The entry points of one compute instance, over its :class:`InstanceState` (see module
    docs)."""

    # -- configuration -----------------------------------------------------------------------------

    def update_configuration(self, params: ComputeParameters) -> None:
        if not params.is_empty():
            self.broadcast(UpdateConfiguration(params))

    def allow_writes(self, id: GlobalId) -> None:
        c = self.collection(id)
        if self.read_only or not c.read_only or c.as_of.is_empty():
            return
        c.read_only = False
        self.broadcast(AllowWrites(id))

    # -- collections, peeks and holds ------------------------------------------------------------

    def create_dataflow(
        self, dataflow: DataflowDescription, target_replica: ReplicaId | None = None
    ) -> None:
        """Install ``dataflow`` (see :mod:`spate.compute.controller.dataflows`)."""
        dataflows.create_dataflow(self, dataflow, target_replica)

    def drop_collections(self, ids: Iterable[GlobalId]) -> None:
        dataflows.drop_collections(self, ids)

    def set_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        dataflows.set_read_policy(self, policies)

    def acquire_read_hold(self, id: GlobalId) -> ReadHold:
        """A hold on ``id`` at its current since (the earliest readable time)."""
        self.check_live()
        c = self.collection(id)
        return self.issue_hold(c, c.since())

    def peek(
        self,
        target: IndexTarget | PersistTarget,
        uuid: PeekId,
        timestamp: int,
        *,
        finishing: RowSetFinishing,
        result_desc: RelationDesc,
        literal_constraints: tuple[Row, ...] | None = None,
        target_replica: ReplicaId | None = None,
        requested_at_ms: int = 0,
    ) -> None:
        issue_peek(
            self,
            target=target,
            uuid=uuid,
            timestamp=timestamp,
            finishing=finishing,
            result_desc=result_desc,
            literal_constraints=literal_constraints,
            target_replica=target_replica,
            requested_at_ms=requested_at_ms,
        )

    def cancel_peek(self, uuid: PeekId, reason: PeekResult | None = None) -> None:
        """Cancel ``uuid``: the caller receives ``reason`` (default: canceled). Unknown uuids
        are ignored with a warning."""
        self.check_live()
        self.begin()
        try:
            self.peeks.cancel(uuid, PeekCanceled() if reason is None else reason)
        finally:
            self.end()

    # -- replicas --------------------------------------------------------------------------------

    def add_replica(self, id: ReplicaId, config: ReplicaConfig) -> None:
        """Connect replica ``id`` and replay the reduced history to it."""
        self.check_live()
        if id in self.replicas:
            raise ReplicaExists(self.id, id)
        self.begin()
        try:
            self._add_replica(id, config, self.epoch_base + 1)
        finally:
            self.end()

    def _add_replica(self, id: ReplicaId, config: ReplicaConfig, epoch: int) -> None:
        r = ReplicaState(id, epoch, config, HydrationGate(self.hydration_concurrency))
        self.replicas[id] = r
        self._actions.append(ConnectReplica(self.id, id, epoch, config))
        self.history.reduce()
        uppers: dict[GlobalId, Frontier] = {}
        for df in self.history.dataflows():
            for s in df.source_imports:
                uppers[s.id] = self.storage.collection_frontiers(s.id).upper
        self.history.update_source_uppers(uppers)
        replayed_as_of: dict[GlobalId, Frontier] = {}
        for command in self.history.commands():
            if isinstance(command, Hello):
                command = Hello(PROTOCOL_VERSION, epoch, self._ids.uuid().bytes)
            elif isinstance(command, CreateInstance) and config.instance_config is not None:
                command = CreateInstance(config.instance_config)
            elif isinstance(command, CreateDataflow):
                df = command.dataflow
                assert df.as_of is not None
                for export in df.export_ids():
                    replayed_as_of[export] = df.as_of
            self._send(r, command)
        for c in self.collections.values():
            as_of = replayed_as_of.get(c.id, Antichain.empty())
            r.collections[c.id] = ReplicaCollectionState(c, as_of)
            if not as_of.is_empty():
                for h in c.storage_dependencies.values():
                    r.add_input_hold(h.clone())

    def drop_replica(self, id: ReplicaId) -> None:
        self.check_live()
        if id not in self.replicas:
            raise ReplicaMissing(self.id, id)
        self.begin()
        try:
            self._remove_replica(id, "replica dropped")
        finally:
            self.end()

    def _remove_replica(self, id: ReplicaId, reason: str) -> ReplicaState:
        r = self.replicas.pop(id)
        self._actions.append(DisconnectReplica(self.id, id, r.epoch, reason))
        r.release_input_holds()
        self.peeks.fail_targeting(id)
        self.subscribes.fail_targeting(id)
        return r

    def replica_connected(self, id: ReplicaId, epoch: int) -> None:
        r = self.replicas.get(id)
        if r is not None and r.epoch == epoch and r.health is ReplicaHealth.CONNECTING:
            r.health = ReplicaHealth.CONNECTED

    def replica_failed(self, id: ReplicaId, epoch: int, reason: str) -> None:
        """The driver lost ``(id, epoch)``: mark it failed; maintenance rehydrates it."""
        r = self.replicas.get(id)
        if r is None or r.epoch != epoch or r.health is ReplicaHealth.FAILED:
            return
        _log.warning(
            "replica failed: instance=%s replica=%s epoch=%d: %s", self.id, id, epoch, reason
        )
        self._mark_failed(r, reason)

    def _mark_failed(self, r: ReplicaState, reason: str) -> None:
        r.health = ReplicaHealth.FAILED
        r.failures += 1
        r.last_error = reason
        self._actions.append(DisconnectReplica(self.id, r.id, r.epoch, reason))

    def _replica_bug(self, r: ReplicaState, message: str) -> None:
        _log.error(
            "replica bug, disconnecting: instance=%s replica=%s epoch=%d: %s",
            self.id,
            r.id,
            r.epoch,
            message,
        )
        self._mark_failed(r, f"replica bug: {message}")

    # -- responses ---------------------------------------------------------------------------------

    def handle_response(self, replica: ReplicaId, epoch: int, response: ComputeResponse) -> None:
        """A response from ``(replica, epoch)``; stale epochs and failed replicas are ignored."""
        r = self.replicas.get(replica)
        if r is None or r.epoch != epoch or r.health is ReplicaHealth.FAILED or self.shut_down:
            return
        self._defer += 1
        try:
            if isinstance(response, Frontiers):
                self._on_frontiers(r, response)
            elif isinstance(response, PeekResponse):
                self._on_peek_response(r, response)
            elif isinstance(response, SubscribeResponse):
                self._on_subscribe_response(r, response)
            elif isinstance(response, Status):
                _log.debug("status from replica=%s: %s", replica, response.message)
                self._on_status(r, response)
            elif isinstance(response, StatisticsUpdates):
                self._on_statistics(r, response)
        finally:
            self.end()

    def _on_statistics(self, r: ReplicaState, update: StatisticsUpdates) -> None:
        # Each entry is the replica's full current value: the latest one replaces the previous.
        # Collections the controller no longer knows (dropped meanwhile) are ignored.
        for stats in update.dataflows:
            rc = r.collections.get(stats.id)
            if rc is not None:
                rc.statistics = stats

    def _on_status(self, r: ReplicaState, status: Status) -> None:
        c = r.collections.get(status.id) if status.id is not None else None
        if c is None:
            return
        if is_failed_status(status):
            c.failure = status.message
        elif status.message.startswith(EVAL_ERROR_STATUS):
            c.eval_error = status.message[len(EVAL_ERROR_STATUS) :]
        elif status.message == EVAL_ERRORS_CLEARED:
            c.eval_error = None

    def _on_frontiers(self, r: ReplicaState, f: Frontiers) -> None:
        # The hot path (every replica reports every collection several times a second): O(1).
        rc = r.collections.get(f.id)
        write, input, output = f.write_frontier, f.input_frontier, f.output_frontier
        if rc is None:
            # A reconciling replica may report drops of collections it no longer needs.
            if any(x is not None and not x.is_empty() for x in (write, input, output)):
                self._replica_bug(r, f"frontiers for unknown collection {f.id}")
            return
        c = rc.collection
        if c.kind is CollectionKind.SUBSCRIBE:
            self._replica_bug(r, f"Frontiers for subscribe {f.id}")
            return
        if write is not None and not frontier_le(rc.write_frontier, write):
            return self._regressed(r, f.id, "write", rc.write_frontier, write)
        if input is not None and not frontier_le(rc.input_frontier, input):
            return self._regressed(r, f.id, "input", rc.input_frontier, input)
        if output is not None and not frontier_le(rc.output_frontier, output):
            return self._regressed(r, f.id, "output", rc.output_frontier, output)
        if write is not None:
            if write != rc.write_frontier:
                rc.steps += 1
            rc.write_frontier = write
            self.update_write_frontier(c, write)
        if input is not None:
            # The input holds follow at the next maintenance pass: holding storage back a
            # little longer is always safe, and it keeps a report O(1).
            rc.input_frontier = input
            rc.input_reported = True
            r.inputs_dirty = True
        if output is not None:
            rc.output_frontier = output
            for command in r.gate.on_progress(f.id, output):
                self._actions.append(SendCommand(self.id, r.id, r.epoch, command))

    def _regressed(
        self, r: ReplicaState, id: GlobalId, kind: str, old: Frontier, new: Frontier
    ) -> None:
        self._replica_bug(r, f"{kind} frontier of {id} regressed from {old} to {new}")

    def _on_peek_response(self, r: ReplicaState, p: PeekResponse) -> None:
        if p.uuid not in r.outstanding_peeks:
            self._replica_bug(r, f"unsolicited or duplicate response to peek {p.uuid}")
            return
        r.outstanding_peeks.discard(p.uuid)
        self.peeks.on_response(r.id, p.uuid, p.response)

    def _on_subscribe_response(self, r: ReplicaState, s: SubscribeResponse) -> None:
        if isinstance(s.response, SubscribeBatch):
            upper = s.response.upper.as_option()
            latency_trace.mark("subscribe_received", s.id, -1 if upper is None else upper)
        rc = r.collections.get(s.id)
        c = self.collections.get(s.id)
        if rc is None or c is None:
            if isinstance(s.response, SubscribeBatch):
                self._replica_bug(r, f"subscribe batch for unknown collection {s.id}")
            return
        if c.kind is not CollectionKind.SUBSCRIBE:
            self._replica_bug(r, f"subscribe response for {c.kind.value} {s.id}")
            return
        if rc.write_frontier.is_empty():
            self._replica_bug(r, f"subscribe response for {s.id} after it completed or dropped")
            return
        resp = s.response
        if isinstance(resp, SubscribeBatch):
            last = rc.last_subscribe_upper
            if last is not None and resp.lower != last:
                self._replica_bug(
                    r,
                    f"subscribe {s.id}: batch [{resp.lower}, {resp.upper}) does not start "
                    f"at {last}",
                )
                return
            if not frontier_le(resp.lower, resp.upper) or not frontier_le(
                rc.write_frontier, resp.upper
            ):
                self._replica_bug(
                    r,
                    f"subscribe {s.id}: batch [{resp.lower}, {resp.upper}) regresses from "
                    f"{rc.write_frontier}",
                )
                return
            rc.last_subscribe_upper = resp.upper
            self._set_replica_frontiers(r, rc, s.id, resp.upper)
            self.update_write_frontier(c, resp.upper)
            self.subscribes.on_batch(r.id, s.id, resp)
        else:
            self._set_replica_frontiers(r, rc, s.id, Antichain.empty())
            self.subscribes.on_dropped_at(r.id, s.id)

    def _set_replica_frontiers(
        self, r: ReplicaState, rc: ReplicaCollectionState, id: GlobalId, frontier: Frontier
    ) -> None:
        rc.write_frontier = rc.input_frontier = rc.output_frontier = frontier
        rc.input_reported = True
        r.inputs_dirty = True
        for command in r.gate.on_progress(id, frontier):
            self._actions.append(SendCommand(self.id, r.id, r.epoch, command))

    # -- maintenance -------------------------------------------------------------------------------

    def maintain(self) -> None:
        """One maintenance pass: rehydrate failed replicas, downgrade warmup holds,
        schedule collections whose inputs are ready, clean up dropped collections."""
        if self.shut_down:
            return
        self.begin()
        try:
            self._rehydrate_failed_replicas()
            maintenance.move_input_holds(self)
            maintenance.downgrade_warmup_holds(self)
            for id in list(self.unscheduled):
                self.maybe_schedule(self.collections[id])
            maintenance.cleanup_dropped(self)
            self._bound_history()
        finally:
            self.end()

    def _bound_history(self) -> None:
        """Reduce the command history when the commands of dropped objects outweigh those of
        the live ones. The history reduces itself whenever it doubles since its last reduction,
        which bounds it by the most objects ever live, not by those live now: after many drops
        (and a replica-less instance never replays) it would keep their commands."""
        live = 8 + 4 * len(self.collections) + len(self.peeks)
        if len(self.history) > 2 * live:
            self.history.reduce()

    def _rehydrate_failed_replicas(self) -> None:
        for r in [r for r in self.replicas.values() if r.is_failed()]:
            old = self._remove_replica(r.id, "rehydrating failed replica")
            self._add_replica(r.id, old.config, old.epoch + 1)
            new = self.replicas[r.id]
            new.failures, new.last_error = old.failures, old.last_error

    # -- shutdown ----------------------------------------------------------------------------------

    def shutdown(self, reason: str) -> None:
        """Give up everything: pending peeks fail, holds on other collections are released,
        replica clients are closed. Holds handed out on this instance's collections become
        inert."""
        if self.shut_down:
            return
        self.begin()
        try:
            self.peeks.cancel_all(reason)
            for id in list(self.replicas):
                self._remove_replica(id, reason)
            for c in list(self.collections.values()):
                self.subscribes.remove(c.id)
        finally:
            self.end()
        self.shut_down = True
        for c in self.collections.values():
            for hold in c.storage_dependencies.values():
                hold.release()
        self.collections.clear()

    def maybe_schedule(self, c: CollectionState) -> None:
        maintenance.maybe_schedule(self, c)
