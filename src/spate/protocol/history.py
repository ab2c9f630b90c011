"""The compute command history: every command an instance's replicas must see, kept reduced.

The compute controller keeps one ``ComputeCommandHistory`` per instance and pushes
every command it broadcasts to the instance's replicas; a new or reconnected replica is
rehydrated by replaying :meth:`ComputeCommandHistory.commands` (after :meth:`reduce` and
:meth:`update_source_uppers`). Replicas keep one too, for reconciliation: they call
:meth:`discard_peeks` and then :meth:`reduce`.

Guarantee (checked by a property test against a model of replica state): replaying the reduced
history into a fresh replica gives the same end state as replaying every command ever pushed —
the same live exports with the same since (``as_of`` joined with the latest compaction), the
same scheduled exports, the same live peeks, the same merged configuration, the same
``AllowWrites`` and initialization state. The reduced history is O(live objects): it never
holds a ``CancelPeek``, a dataflow whose exports were all compacted to ``{}``, or more than one
``UpdateConfiguration``.

Preconditions on the pushed commands (the controller's obligations): per collection,
``AllowCompaction`` frontiers never regress and are never below the dataflow's ``as_of``; a
``Peek`` is followed by a ``CancelPeek`` once it is answered; an index is not compacted to
``{}`` while a live peek reads it.

Replay order: ``Hello``, ``CreateInstance``, the merged ``UpdateConfiguration`` (only if a field
is set), every ``CreateDataflow`` (in creation order, so imports precede their dependents),
every ``Schedule``, every live ``Peek``, the remaining ``AllowCompaction`` (after the peeks, so
that they stay valid), ``InitializationComplete`` (if it was pushed), ``AllowWrites``.

The history is a pure value (no I/O, no clock); it is not thread-safe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Final

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, PeekId
from spate.plan.dataflow import DataflowDescription, SourceImport
from spate.protocol.common import Hello
from spate.protocol.compute import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    ComputeParameters,
    CreateDataflow,
    CreateInstance,
    InitializationComplete,
    Peek,
    Schedule,
    UpdateConfiguration,
)
from spate.soft_assert import soft_assert

__all__ = ["ComputeCommandHistory"]

_COMMAND_TYPES: Final = (
    Hello,
    CreateInstance,
    InitializationComplete,
    AllowWrites,
    UpdateConfiguration,
    CreateDataflow,
    Schedule,
    AllowCompaction,
    Peek,
    CancelPeek,
)


class ComputeCommandHistory:
    """An instance's compute commands, reduced whenever it doubles in length (amortised O(1)).

    * :meth:`push` appends a command; when the history is longer than twice its length after
      the last reduction, it reduces.
    * :meth:`reduce` replaces the history with the minimal equivalent one (module docs).
    * :meth:`discard_peeks` drops every ``Peek`` and ``CancelPeek`` (a replica cannot know
      whether a peek is still live elsewhere).
    * :meth:`update_source_uppers` refreshes each dataflow's recorded source-import uppers.
    * :meth:`commands` is the replay order.
    """

    __slots__ = ("_commands", "_reduced_len")

    def __init__(self) -> None:
        self._commands: list[ComputeCommand] = []
        self._reduced_len = 0

    # -- inspection -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._commands)

    def __iter__(self) -> Iterator[ComputeCommand]:
        return iter(tuple(self._commands))

    def commands(self) -> tuple[ComputeCommand, ...]:
        """The commands in replay order (as reduced so far; call :meth:`reduce` first to get
        the minimal history)."""
        return tuple(self._commands)

    def dataflows(self) -> tuple[DataflowDescription, ...]:
        """The dataflows currently in the history, in creation order."""
        return tuple(c.dataflow for c in self._commands if isinstance(c, CreateDataflow))

    def peek_count(self) -> int:
        """How many ``Peek`` commands the history holds (live or not yet reduced)."""
        return sum(1 for c in self._commands if isinstance(c, Peek))

    # -- mutation ---------------------------------------------------------------------------

    def push(self, command: ComputeCommand) -> None:
        """Append ``command``; reduce when the history has doubled since the last reduction.

        Raises ``TypeError`` for anything that is not a compute command (nothing is appended).
        """
        if not isinstance(command, _COMMAND_TYPES):
            raise TypeError(f"not a compute command: {type(command).__name__}")
        if isinstance(command, CreateDataflow) and command.dataflow.as_of is None:
            raise ValueError(
                f"CreateDataflow {command.dataflow.debug_name!r} exporting "
                f"{[str(i) for i in command.dataflow.export_ids()]} has no as_of"
            )
        self._commands.append(command)
        if len(self._commands) > 2 * self._reduced_len:
            self.reduce()

    def discard_peeks(self) -> None:
        """Remove every ``Peek`` and ``CancelPeek``."""
        self._commands = [c for c in self._commands if not isinstance(c, (Peek, CancelPeek))]

    def update_source_uppers(self, uppers: Mapping[GlobalId, Frontier]) -> None:
        """Set each dataflow's source-import ``upper`` to ``uppers[import id]``.

        Used before replaying to a new replica, so it learns how far each input is already
        sealed. Ids absent from ``uppers`` keep their recorded upper; an upper never moves back
        (a smaller given upper is ignored).
        """
        out: list[ComputeCommand] = []
        for c in self._commands:
            if isinstance(c, CreateDataflow):
                imports = tuple(
                    _advance_upper(s, uppers.get(s.id)) for s in c.dataflow.source_imports
                )
                if imports != c.dataflow.source_imports:
                    c = CreateDataflow(dataclasses.replace(c.dataflow, source_imports=imports))
            out.append(c)
        self._commands = out

    def reduce(self) -> None:
        """Replace the history with the minimal equivalent one (module docs)."""
        hello: Hello | None = None
        create_instance: CreateInstance | None = None
        initialized = False
        params = ComputeParameters()
        dataflows: list[DataflowDescription] = []
        scheduled: dict[GlobalId, None] = {}
        final: dict[GlobalId, Frontier] = {}
        live_peeks: dict[PeekId, Peek] = {}
        writes: dict[GlobalId, None] = {}

        for c in self._commands:
            if isinstance(c, Hello):
                hello = c
            elif isinstance(c, CreateInstance):
                create_instance = c
            elif isinstance(c, InitializationComplete):
                initialized = True
            elif isinstance(c, UpdateConfiguration):
                params = params.update(c.params)
            elif isinstance(c, CreateDataflow):
                dataflows.append(c.dataflow)
            elif isinstance(c, Schedule):
                scheduled[c.id] = None
            elif isinstance(c, AllowCompaction):
                final[c.id] = c.frontier
            elif isinstance(c, Peek):
                live_peeks[c.uuid] = c
            elif isinstance(c, CancelPeek):
                live_peeks.pop(c.uuid, None)
            else:
                writes[c.id] = None

        live: list[DataflowDescription] = []
        exported: set[GlobalId] = set()
        for df in dataflows:
            initial = df.as_of
            assert initial is not None  # checked in push
            exports = df.export_ids()
            exported.update(exports)
            as_of: Frontier = Antichain.empty()
            for id in exports:
                as_of = as_of.meet(final.get(id, initial))
            if not initial.less_equal(as_of):  # format the message only on failure
                soft_assert(
                    False,
                    f"dataflow exporting {[str(i) for i in exports]}: compaction to {as_of} "
                    f"is below its as_of {initial}",
                )
            for id in exports:
                if final.get(id) == as_of:
                    del final[id]
            if not as_of.is_empty():
                live.append(df if as_of == initial else df.with_as_of(as_of))

        retained = {id for df in live for id in df.export_ids()}
        # Compactions of exports of dropped dataflows were all {} and folded above; a stray
        # compaction to {} of an id no dataflow exports is a no-op for any replica.
        compactions = [
            AllowCompaction(id, f)
            for id, f in final.items()
            if id in retained or (id not in exported and not f.is_empty())
        ]

        out: list[ComputeCommand] = []
        if hello is not None:
            out.append(hello)
        if create_instance is not None:
            out.append(create_instance)
        if not params.is_empty():
            out.append(UpdateConfiguration(params))
        out.extend(CreateDataflow(df) for df in live)
        out.extend(Schedule(id) for id in scheduled if id in retained)
        out.extend(live_peeks.values())
        out.extend(compactions)
        if initialized:
            out.append(InitializationComplete())
        out.extend(AllowWrites(id) for id in writes if id in retained)
        self._commands = out
        self._reduced_len = len(out)


def _advance_upper(imp: SourceImport, upper: Frontier | None) -> SourceImport:
    if upper is None or upper == imp.upper or not imp.upper.less_equal(upper):
        return imp
    return dataclasses.replace(imp, upper=upper)
