"""Read capabilities of storage collections and exports: how every ``since`` is derived (pure).

Each collection counts its read capabilities in a
``MutableAntichain``; its **since is their frontier**. They are:

* the **implied capability** ``read_policy.frontier(write_frontier)``, re-evaluated when the
  write frontier or the policy changes and applied **only if it does not regress** (a policy
  never recovers a capability already given up);
* every outstanding :class:`~spate.frontier.ReadHold` (handed out at the current since by
  :meth:`Capabilities.acquire_read_holds`, counted before it is returned);
* the **dependency holds** of collections that read this one: an ingestion export holds its
  ingestion's remap collection at ``since ⊓ (upper - 1)`` (so the remap stays readable where the
  export must resume), and an export (sink) holds its input at the export's read capability,
  ``step_back(write frontier)`` from its acquired since on.

Whenever a since changes, dependency holds move with it (``update_read_capabilities`` is a
worklist over collections) and the new since is recorded in :attr:`Capabilities.pending` for the
driver to push to persist (critical since handles) and to the replicas (``AllowCompaction``).
Nothing here does I/O. Invariants (checked by ``MutableAntichain``): counts never go negative and
no capability is added below a frontier; sinces and write frontiers never regress.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from spate.frontier.antichain import Antichain, Frontier
from spate.frontier.mutable import ChangeBatch, MutableAntichain
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import NoPolicy, ReadPolicy, StepBack, ValidFrom
from spate.ids import GlobalId, ShardId
from spate.soft_assert import soft_assert
from spate.storage.controller.errors import IdentifierMissing
from spate.storage.controller.types import (
    CollectionDescription,
    ExportDescription,
    IngestionExport,
)


def _changes(old: Frontier, new: Frontier) -> ChangeBatch[int]:
    batch: ChangeBatch[int] = ChangeBatch()
    for t in old:
        batch.update(t, -1)
    for t in new:
        batch.update(t, 1)
    return batch


@dataclass
class CollectionState:
    """A storage collection as the controller tracks it."""

    id: GlobalId
    description: CollectionDescription
    shard: ShardId
    read_capabilities: MutableAntichain[int]
    implied_capability: Frontier
    read_policy: ReadPolicy
    write_frontier: Frontier
    dependencies: tuple[GlobalId, ...] = ()
    dependency_hold: Frontier = field(default_factory=Antichain.empty)
    dropped: bool = False

    @property
    def since(self) -> Frontier:
        return self.read_capabilities.frontier()

    def wanted_dependency_hold(self) -> Frontier:
        """Where this collection needs its dependencies readable (module docs)."""
        if self.since.is_empty():
            return self.since
        if isinstance(self.description.data_source, IngestionExport):
            if self.write_frontier.is_empty():
                return self.since
            return self.since.meet(self.write_frontier.step_back())
        return self.since


@dataclass
class ExportState:
    """An export (sink) as the controller tracks it."""

    id: GlobalId
    from_id: GlobalId
    description: ExportDescription
    as_of: Frontier
    read_capability: Frontier
    read_policy: ReadPolicy = field(default_factory=StepBack)
    write_frontier: Frontier = field(default_factory=Antichain.minimum)
    dropped: bool = False


class Capabilities:
    """The read-capability bookkeeping of every collection and export (see the module docs)."""

    def __init__(self) -> None:
        self.collections: dict[GlobalId, CollectionState] = {}
        self.exports: dict[GlobalId, ExportState] = {}
        self.pending: dict[GlobalId, Frontier] = {}
        """New sinces (collections) and read capabilities (exports) not yet pushed out."""

    # -- creation ---------------------------------------------------------------------------------

    def add_collection(
        self,
        id: GlobalId,
        description: CollectionDescription,
        shard: ShardId,
        *,
        since: Frontier,
        upper: Frontier,
        dependencies: Sequence[GlobalId] = (),
    ) -> CollectionState:
        """Track a new collection whose shard has ``since`` and ``upper``.

        The collection's since is the join of ``since``, ``description.since`` and the sinces
        of its dependencies (it cannot be readable where they are not).
        """
        initial = since
        if description.since is not None:
            initial = initial.join(description.since)
        for dep in dependencies:
            initial = initial.join(self.collections[dep].since)
        state = CollectionState(
            id=id,
            description=description,
            shard=shard,
            read_capabilities=MutableAntichain([(t, 1) for t in initial]),
            implied_capability=initial,
            read_policy=NoPolicy(initial),
            write_frontier=upper,
            dependencies=tuple(dependencies),
        )
        self.collections[id] = state
        hold = state.wanted_dependency_hold()
        for dep in dependencies:
            hold = hold.join(self.collections[dep].since)
        state.dependency_hold = hold
        self.update_read_capabilities(
            {dep: ChangeBatch([(t, 1) for t in hold]) for dep in dependencies}
        )
        return state

    def add_export(
        self,
        id: GlobalId,
        from_id: GlobalId,
        description: ExportDescription,
        *,
        as_of: Frontier,
        acquired_since: Frontier,
    ) -> ExportState:
        """Track an export whose hold on ``from_id`` (already counted at ``acquired_since``)
        becomes the export's read capability."""
        state = ExportState(id, from_id, description, as_of, read_capability=acquired_since)
        self.exports[id] = state
        return state

    # -- read holds -------------------------------------------------------------------------------

    def hold_changes(self, id: GlobalId, changes: ChangeBatch[int]) -> None:
        """The issuer channel of the read holds this core hands out."""
        self.update_read_capabilities({id: changes})

    def acquire_read_holds(self, ids: Sequence[GlobalId]) -> list[ReadHold]:
        """One hold per id at its current since; all or nothing (``IdentifierMissing``)."""
        for id in ids:
            state = self.collections.get(id)
            if state is None or state.since.is_empty():
                raise IdentifierMissing(id)
        holds = []
        for id in ids:
            since = self.collections[id].since
            self.update_read_capabilities({id: ChangeBatch([(t, 1) for t in since])})
            holds.append(ReadHold(id, since, self.hold_changes))
        return holds

    # -- policies and frontiers -------------------------------------------------------------------

    def _implied(self, state: CollectionState) -> ChangeBatch[int] | None:
        new = state.read_policy.frontier(state.write_frontier)
        old = state.implied_capability
        if new == old or not old.less_equal(new):
            return None
        state.implied_capability = new
        return _changes(old, new)

    def set_read_policies(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        """Store each policy; move the implied capability if that does not regress it."""
        changes: dict[GlobalId, ChangeBatch[int]] = {}
        for id, policy in policies:
            state = self.collections[id]
            state.read_policy = policy
            batch = self._implied(state)
            if batch is not None:
                changes.setdefault(id, ChangeBatch()).extend(batch)
        self.update_read_capabilities(changes)

    def update_write_frontiers(self, uppers: Iterable[tuple[GlobalId, Frontier]]) -> list[GlobalId]:
        """Advance write frontiers (regressions ignored); return the ids that advanced."""
        advanced: list[GlobalId] = []
        changes: dict[GlobalId, ChangeBatch[int]] = {}
        for id, upper in uppers:
            state = self.collections.get(id)
            if state is not None:
                if upper == state.write_frontier or not state.write_frontier.less_equal(upper):
                    continue
                state.write_frontier = upper
                advanced.append(id)
                batch = self._implied(state)
                if batch is not None:
                    changes.setdefault(id, ChangeBatch()).extend(batch)
                self._move_dependency_hold(state, changes)
                continue
            export = self.exports.get(id)
            if export is None:
                continue
            if upper == export.write_frontier or not export.write_frontier.less_equal(upper):
                continue
            export.write_frontier = upper
            advanced.append(id)
            if not export.dropped:
                self._move_export_hold(export, export.read_policy.frontier(upper), changes)
        self.update_read_capabilities(changes)
        return advanced

    def _move_dependency_hold(
        self, state: CollectionState, changes: dict[GlobalId, ChangeBatch[int]]
    ) -> None:
        if not state.dependencies:
            return
        new = state.wanted_dependency_hold()
        old = state.dependency_hold
        if new == old or not old.less_equal(new):
            return
        state.dependency_hold = new
        for dep in state.dependencies:
            changes.setdefault(dep, ChangeBatch()).extend(_changes(old, new))

    def _move_export_hold(
        self, export: ExportState, new: Frontier, changes: dict[GlobalId, ChangeBatch[int]]
    ) -> None:
        old = export.read_capability
        if new == old or not old.less_equal(new):
            return
        export.read_capability = new
        changes.setdefault(export.from_id, ChangeBatch()).extend(_changes(old, new))
        self.pending[export.id] = new

    def update_read_capabilities(self, changes: Mapping[GlobalId, ChangeBatch[int]]) -> None:
        """Apply capability changes and propagate since changes to dependencies (worklist)."""
        work: dict[GlobalId, ChangeBatch[int]] = {
            id: batch.copy() for id, batch in changes.items() if not batch.is_empty()
        }
        while work:
            id = max(work)  # dependents usually have larger ids: fewer rounds
            batch = work.pop(id)
            state = self.collections.get(id)
            if state is None:
                soft_assert(False, f"read capability changes for unknown collection {id}")
                continue
            moved = state.read_capabilities.update_iter(batch.items())
            if moved.is_empty():
                continue
            self.pending[id] = state.since
            more: dict[GlobalId, ChangeBatch[int]] = {}
            self._move_dependency_hold(state, more)
            for dep, b in more.items():
                work.setdefault(dep, ChangeBatch()).extend(b.items())

    # -- dropping ---------------------------------------------------------------------------------

    def drop_collection(self, id: GlobalId) -> None:
        """Give up the implied capability (``ValidFrom({})``); the since follows once every
        other hold is gone."""
        state = self.collections[id]
        state.dropped = True
        self.set_read_policies([(id, ValidFrom(Antichain.empty()))])

    def drop_export(self, id: GlobalId) -> None:
        """Release the export's hold on its input; its write frontier becomes ``{}``."""
        export = self.exports[id]
        export.dropped = True
        old = export.read_capability
        export.read_capability = Antichain.empty()
        export.write_frontier = Antichain.empty()
        self.pending[id] = Antichain.empty()
        self.update_read_capabilities({export.from_id: _changes(old, Antichain.empty())})

    def take_pending(self) -> dict[GlobalId, Frontier]:
        out, self.pending = self.pending, {}
        return out
