"""Sequential hydration: at most ``limit`` dataflows hydrate at once on a replica.

Hydrating a dataflow (computing its initial snapshot) is the most expensive thing a replica
does; hydrating hundreds at once after a restart thrashes it. The gate sits between the
instance and one replica connection and holds back ``Schedule`` commands of non-transient
collections while ``limit`` of them are hydrating, releasing them in order as hydration ends.

* A collection is *tracked* from the ``CreateDataflow`` that exports it until it is hydrated:
  its output frontier passed its as_of (or became ``{}``), or a subscribe batch's upper did.
* ``AllowCompaction({})`` untracks a collection (a queued ``Schedule`` for it is dropped: the
  replica never needs to start a dataflow it is told to drop).
* Transient collections and ``Schedule``s of untracked ids pass straight through.
* A gate belongs to one connection: a reconnected replica gets a fresh one.

Pure state: commands in, commands out; no I/O.
"""

from __future__ import annotations

from spate.compute.controller.collection import frontier_lt
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId
from spate.protocol.compute import AllowCompaction, ComputeCommand, CreateDataflow, Schedule

DEFAULT_HYDRATION_CONCURRENCY = 4
"""Dataflows that may hydrate at once on one replica unless configured otherwise."""


class HydrationGate:
    __slots__ = ("_as_of", "_hydrating", "_limit", "_queued")

    def __init__(self, limit: int = DEFAULT_HYDRATION_CONCURRENCY) -> None:
        if limit < 1:
            raise ValueError(f"hydration concurrency must be >= 1, got {limit}")
        self._limit = limit
        self._as_of: dict[GlobalId, Frontier] = {}
        self._hydrating: set[GlobalId] = set()
        # Insertion-ordered set of collections whose Schedule is held back.
        self._queued: dict[GlobalId, None] = {}

    @property
    def hydrating(self) -> frozenset[GlobalId]:
        return frozenset(self._hydrating)

    @property
    def queued(self) -> tuple[GlobalId, ...]:
        return tuple(self._queued)

    def on_command(self, command: ComputeCommand) -> list[ComputeCommand]:
        """The commands to send now in place of ``command`` (possibly none)."""
        if isinstance(command, CreateDataflow):
            df = command.dataflow
            if df.as_of is not None and not df.as_of.is_empty():
                for id in df.export_ids():
                    if not id.is_transient():
                        self._as_of[id] = df.as_of
            return [command]
        if isinstance(command, Schedule):
            id = command.id
            if id not in self._as_of or id in self._hydrating:
                return [command]
            if len(self._hydrating) < self._limit:
                self._hydrating.add(id)
                return [command]
            self._queued[id] = None
            return []
        if isinstance(command, AllowCompaction) and command.frontier.is_empty():
            self._untrack(command.id)
            return [command, *self._release()]
        return [command]

    def on_progress(self, id: GlobalId, frontier: Frontier) -> list[ComputeCommand]:
        """The replica's output frontier (or subscribe upper) of ``id`` reached ``frontier``."""
        as_of = self._as_of.get(id)
        if as_of is None or not (frontier.is_empty() or frontier_lt(as_of, frontier)):
            return []
        self._untrack(id)
        return self._release()

    def _untrack(self, id: GlobalId) -> None:
        self._as_of.pop(id, None)
        self._hydrating.discard(id)
        self._queued.pop(id, None)

    def _release(self) -> list[ComputeCommand]:
        out: list[ComputeCommand] = []
        while self._queued and len(self._hydrating) < self._limit:
            id = next(iter(self._queued))
            del self._queued[id]
            self._hydrating.add(id)
            out.append(Schedule(id))
        return out
