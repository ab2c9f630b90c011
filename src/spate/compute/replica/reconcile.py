"""Replica-side reconciliation: which running dataflows a new controller can reuse.

When a controller (re)connects, it replays its reduced history. The replica compares every
``CreateDataflow`` of that history with the dataflows it is already running, matched by their
*set of export ids*. An old dataflow ``O`` is reused for a new description ``N`` iff:

(a) **compatible**: the same index and sink exports, the same objects to build, the same index
    imports, the same source imports (ignoring their recorded ``upper``, which the controller
    refreshes on replay), the same ``until``, and ``O.as_of <= N.as_of``;
(b) **uncompacted**: every export of ``O`` is compacted to at most ``N.as_of`` (so reads at
    ``N.as_of`` are still possible);
(c) it exports **no subscribe** (subscribe output cannot be replayed);
(d) it is **healthy** (being built or running, not failed) and every index it imports comes
    from a dataflow that is itself reused — a replica-internal arrangement must be the same one;
(e) it is **built**, or its as_of equals ``N.as_of``: a dataflow still waiting to be built has
    not read its inputs yet, and the new controller holds them only from ``N.as_of`` on (built
    at the old as_of it would read times that may have been compacted away).

Every old dataflow not reused is dropped, silently. The plan is pure data; the replica state
applies it (:mod:`spate.compute.replica.state`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription, SourceImport

NOT_IN_HISTORY: Final = "not in the new history"


@dataclass(frozen=True, slots=True)
class RunningDataflow:
    """What reconciliation needs to know about a dataflow the replica runs."""

    key: int
    description: DataflowDescription
    compaction: Mapping[GlobalId, Frontier]
    """Per export, the frontier it was allowed to compact to (at least its as_of)."""
    healthy: bool
    index_sources: Mapping[GlobalId, int]
    """Per index import, the key of the dataflow exporting it on this replica."""
    built: bool = True
    """Whether it has been built (read its inputs at its as_of); else it waits to be."""


@dataclass(frozen=True, slots=True)
class ReconciliationPlan:
    """``reuse[i]`` is the key of the running dataflow reused for new dataflow ``i`` (if any);
    ``drop`` lists the running dataflows to drop, in an order that drops importers first."""

    reuse: Mapping[int, int]
    drop: tuple[int, ...]
    reasons: Mapping[int, str]
    """Why running dataflow ``key`` was not reused (for logs)."""

    @property
    def replaced(self) -> int:
        """Dropped dataflows that the new history recreates (same exports, not reusable)."""
        return sum(1 for k in self.drop if self.reasons.get(k) != NOT_IN_HISTORY)


def _without_uppers(imports: Sequence[SourceImport]) -> tuple[SourceImport, ...]:
    return tuple(dataclasses.replace(s, upper=Antichain.minimum()) for s in imports)


def incompatibility(old: DataflowDescription, new: DataflowDescription) -> str | None:
    """Why ``old`` cannot stand in for ``new`` (condition (a)), or ``None`` if it can."""
    if old.index_exports != new.index_exports:
        return "index exports differ"
    if old.sink_exports != new.sink_exports:
        return "sink exports differ"
    if old.objects_to_build != new.objects_to_build:
        return "objects to build differ"
    if old.index_imports != new.index_imports:
        return "index imports differ"
    if _without_uppers(old.source_imports) != _without_uppers(new.source_imports):
        return "source imports differ"
    if old.until != new.until:
        return f"until differs ({old.until} vs {new.until})"
    assert old.as_of is not None and new.as_of is not None
    if not old.as_of.less_equal(new.as_of):
        return f"new as_of {new.as_of} is before the running as_of {old.as_of}"
    return None


def plan_reconciliation(
    running: Sequence[RunningDataflow], new: Sequence[DataflowDescription]
) -> ReconciliationPlan:
    """Match ``new`` (the replayed ``CreateDataflow``s, in order) with ``running``."""
    by_exports: dict[frozenset[GlobalId], RunningDataflow] = {}
    for r in running:
        by_exports[frozenset(r.description.export_ids())] = r
    reuse: dict[int, int] = {}
    reasons: dict[int, str] = {}
    # Which running dataflow (if reused) provides each index id in the new world.
    provider: dict[GlobalId, int] = {}
    for i, df in enumerate(new):
        old = by_exports.get(frozenset(df.export_ids()))
        reason = None if old is None else _why_not(old, df, provider)
        if old is not None and reason is None:
            reuse[i] = old.key
            for e in df.index_exports:
                provider[e.id] = old.key
        elif old is not None:
            reasons[old.key] = reason or ""
    reused = set(reuse.values())
    for r in running:
        if r.key not in reused and r.key not in reasons:
            reasons[r.key] = NOT_IN_HISTORY
    # Importers before the dataflows they import from.
    doomed = [r for r in running if r.key not in reused]
    order = sorted(doomed, key=lambda r: -r.key)
    return ReconciliationPlan(reuse, tuple(r.key for r in order), reasons)


def _why_not(
    old: RunningDataflow, new: DataflowDescription, provider: Mapping[GlobalId, int]
) -> str | None:
    if not old.healthy:
        return "it failed"
    why = incompatibility(old.description, new)
    if why is not None:
        return why
    assert new.as_of is not None
    for id, frontier in old.compaction.items():
        if not frontier.less_equal(new.as_of):
            return f"export {id} is compacted to {frontier}, beyond the new as_of {new.as_of}"
    if not old.built and old.description.as_of != new.as_of:
        return (
            f"it is not built yet and the new history starts it at {new.as_of}, not at "
            f"{old.description.as_of} (its inputs are held only from the new as_of on)"
        )
    if new.subscribe_ids():
        return "it exports a subscribe"
    for ix in new.index_imports:
        if provider.get(ix.id) != old.index_sources.get(ix.id):
            return f"its index import {ix.id} is not reused"
    return None


class ReconciliationStats:
    """Counts over all reconciliations (exported as metrics)."""

    __slots__ = ("dropped", "reconciliations", "replaced", "reused")

    def __init__(self) -> None:
        self.reconciliations = 0
        self.reused = 0
        self.replaced = 0
        self.dropped = 0
