"""The storage command history: what a storage replica must see, kept reduced.

The storage controller keeps one ``StorageCommandHistory`` per storage instance and replays
:meth:`StorageCommandHistory.commands` (after :meth:`~StorageCommandHistory.reduce`) to a new or
reconnected replica, filtered to the objects that run on it (:meth:`~StorageCommandHistory.
commands_for`).

Reduction rules:

* keep the last ``Hello``; merge every ``UpdateConfiguration`` into one (only if a field is set);
* keep the **latest** ``RunIngestion`` / ``RunSink`` per id (an altered object is re-sent);
* an ingestion whose own id was compacted to ``{}`` is dropped with all its compactions;
  otherwise it is kept together with the latest compaction of each of its collections
  (the ingestion itself, its exports, its remap collection) — also ``{}`` for a dropped export;
* a sink compacted to ``{}`` is dropped; otherwise the ``RunSink`` is kept with its compaction
  folded into the description's ``as_of`` (``as_of ⊔ frontier``) and no ``AllowCompaction``;
* compactions of ids that no kept ingestion or sink owns are dropped;
* then ``InitializationComplete`` and ``AllowWrites`` if they were pushed.

Replay order: ``Hello``, ``UpdateConfiguration``, ``RunIngestion``*, ``RunSink``*,
``AllowCompaction``*, ``InitializationComplete``, ``AllowWrites``.

Guarantee (property test against a model of a storage replica): replaying the reduced history
gives the same end state as replaying every command pushed — same running ingestions with the
same since per collection, same sinks from the same as_of, same configuration and write mode.
Preconditions: compaction frontiers of one id never regress; the controller compacts only ids
of objects it has run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Final

from spate.frontier.antichain import Frontier
from spate.ids import GlobalId
from spate.protocol.common import Hello
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    InitializationComplete,
    RunIngestion,
    RunSink,
    StorageCommand,
    StorageParameters,
    UpdateConfiguration,
)

__all__ = ["StorageCommandHistory"]

_COMMAND_TYPES: Final = (
    Hello,
    InitializationComplete,
    AllowWrites,
    UpdateConfiguration,
    RunIngestion,
    RunSink,
    AllowCompaction,
)


class StorageCommandHistory:
    """A storage instance's commands, reduced whenever the history doubles (amortised O(1))."""

    __slots__ = ("_commands", "_reduced_len")

    def __init__(self) -> None:
        self._commands: list[StorageCommand] = []
        self._reduced_len = 0

    def __len__(self) -> int:
        return len(self._commands)

    def __iter__(self) -> Iterator[StorageCommand]:
        return iter(tuple(self._commands))

    def commands(self) -> tuple[StorageCommand, ...]:
        """The commands in replay order (call :meth:`reduce` first for the minimal history)."""
        return tuple(self._commands)

    def commands_for(self, runs_here: Callable[[GlobalId], bool]) -> tuple[StorageCommand, ...]:
        """The replay for one replica: ``RunIngestion`` / ``RunSink`` only for objects with
        ``runs_here(id)``, and ``AllowCompaction`` only for collections of those objects."""
        owned: set[GlobalId] = set()
        out: list[StorageCommand] = []
        for c in self._commands:
            if isinstance(c, RunIngestion):
                if not runs_here(c.id):
                    continue
                owned.update(c.description.collection_ids(c.id))
            elif isinstance(c, RunSink):
                if not runs_here(c.id):
                    continue
                owned.add(c.id)
            elif isinstance(c, AllowCompaction) and c.id not in owned:
                continue
            out.append(c)
        return tuple(out)

    def push(self, command: StorageCommand) -> None:
        """Append ``command``; reduce when the history has doubled since the last reduction.

        Raises ``TypeError`` for anything that is not a storage command (nothing appended).
        """
        if not isinstance(command, _COMMAND_TYPES):
            raise TypeError(f"not a storage command: {type(command).__name__}")
        self._commands.append(command)
        if len(self._commands) > 2 * self._reduced_len:
            self.reduce()

    def reduce(self) -> None:
        """Replace the history with the minimal equivalent one (module docs)."""
        hello: Hello | None = None
        initialized = False
        writes = False
        params = StorageParameters()
        ingestions: dict[GlobalId, RunIngestion] = {}
        sinks: dict[GlobalId, RunSink] = {}
        final: dict[GlobalId, Frontier] = {}
        for c in self._commands:
            if isinstance(c, Hello):
                hello = c
            elif isinstance(c, InitializationComplete):
                initialized = True
            elif isinstance(c, AllowWrites):
                writes = True
            elif isinstance(c, UpdateConfiguration):
                params = params.update(c.params)
            elif isinstance(c, RunIngestion):
                ingestions[c.id] = c
            elif isinstance(c, RunSink):
                sinks[c.id] = c
            else:
                final[c.id] = c.frontier

        kept_ingestions: list[RunIngestion] = []
        compactions: list[AllowCompaction] = []
        for id, run in ingestions.items():
            if id in final and final[id].is_empty():
                continue
            kept_ingestions.append(run)
            compactions.extend(
                AllowCompaction(cid, final[cid])
                for cid in run.description.collection_ids(id)
                if cid in final
            )
        kept_sinks: list[RunSink] = []
        for id, sink in sinks.items():
            frontier = final.get(id)
            if frontier is None:
                kept_sinks.append(sink)
            elif not frontier.is_empty():
                as_of = sink.description.as_of.join(frontier)
                if as_of != sink.description.as_of:
                    sink = RunSink(id, dataclasses.replace(sink.description, as_of=as_of))
                kept_sinks.append(sink)

        out: list[StorageCommand] = []
        if hello is not None:
            out.append(hello)
        if not params.is_empty():
            out.append(UpdateConfiguration(params))
        out.extend(kept_ingestions)
        out.extend(kept_sinks)
        out.extend(compactions)
        if initialized:
            out.append(InitializationComplete())
        if writes:
            out.append(AllowWrites())
        self._commands = out
        self._reduced_len = len(out)
