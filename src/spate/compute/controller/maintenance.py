"""The maintenance pass of an instance, after rehydration of failed replicas.

* **Input holds** — each replica's per-input holds move to the least input frontier it
  reported (O(collections) per replica, only when something moved).
* **Warmup** — a collection's warmup capability follows ``min(dependency upper - 1)``, so that
  a replica added now gets an as_of it can compute at once; sinks whose upper is ``{}``
  release it. Each distinct dependency set is evaluated once per pass.
* **Scheduling** — a collection is scheduled once every input's upper is beyond its as_of
  (transient ones at once).
* **Cleanup** — a dropped collection is removed once nothing holds it and every replica
  reported all its frontiers as ``{}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.compute.controller.collection import CollectionKind, CollectionState, frontier_lt
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.protocol.compute import Schedule

if TYPE_CHECKING:
    from spate.compute.controller.instance_state import InstanceState


def move_input_holds(inst: InstanceState) -> None:
    """Move per-replica input holds to the input frontiers reported since the last pass."""
    for r in inst.replicas.values():
        if not r.is_failed():
            r.move_input_holds()


def downgrade_warmup_holds(inst: InstanceState) -> None:
    """Warmup holds follow ``min(dependency upper - 1)``; released for sinks
    whose upper is ``{}``. Each dependency set is evaluated once per pass."""
    targets: dict[tuple[tuple[GlobalId, bool], ...], Frontier] = {}
    for c in inst.collections.values():
        if c.warmup.is_empty():
            continue
        if c.kind is not CollectionKind.INDEX and c.write_frontier.is_empty():
            target: Frontier = Antichain.empty()
        else:
            key = c.warmup_key
            found = targets.get(key)
            if found is None:
                found = targets[key] = _warmup_target(inst, key)
            target = found
        c.advance_warmup(target)


def _warmup_target(inst: InstanceState, deps: tuple[tuple[GlobalId, bool], ...]) -> Frontier:
    target: Frontier = Antichain.empty()
    for dep, from_storage in deps:
        if from_storage:
            upper = inst.storage.collection_frontiers(dep).upper
        else:
            upper = inst.collections[dep].write_frontier
        target = target.meet(upper.step_back())
    return target


def maybe_schedule(inst: InstanceState, c: CollectionState) -> None:
    """Schedule ``c`` once every input's upper is beyond its as_of."""
    if c.scheduled or c.since().is_empty():
        inst.unscheduled.pop(c.id, None)
        return
    if not c.is_transient():
        for dep in c.storage_dependencies:
            if not frontier_lt(c.as_of, inst.storage.collection_frontiers(dep).upper):
                return
        for dep in c.compute_dependencies:
            if dep != c.id and not frontier_lt(c.as_of, inst.collections[dep].write_frontier):
                return
    c.scheduled = True
    inst.unscheduled.pop(c.id, None)
    inst.broadcast(Schedule(c.id))


def cleanup_dropped(inst: InstanceState) -> None:
    """Remove dropped collections that nothing holds and no replica reports any more."""
    for id in list(inst.dropped):
        c = inst.collections[id]
        if not c.read_capabilities.is_empty():
            continue
        if any(
            rc is not None and not rc.all_empty()
            for rc in (r.collections.get(id) for r in inst.replicas.values())
        ):
            continue
        _remove_collection(inst, c)


def _remove_collection(inst: InstanceState, c: CollectionState) -> None:
    for r in inst.replicas.values():
        if r.collections.pop(c.id, None) is not None:
            r.inputs_dirty = True
    for hold in (*c.storage_dependencies.values(), *c.compute_dependencies.values()):
        hold.release()
    del inst.collections[c.id]
    inst.dropped.pop(c.id, None)
    inst.unscheduled.pop(c.id, None)
