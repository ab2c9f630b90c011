"""The subscribes an environment is running, and what each reads, so that dropping an object
ends the subscribes that read it (as Materialize does) instead of leaving them waiting forever.

:func:`register` is called by a subscribe when it starts (with every catalog id it reads,
views included) and :func:`unregister` when it ends; :func:`end_reading` is called by a drop,
after the catalog change is committed: each affected subscribe receives an error batch naming
the dropped object, and its iterator raises it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from spate.compute.controller.responses import SubscribeResponse
from spate.environment.catalog import CatalogState, Item, ViewItem, kind_of
from spate.frontier.antichain import Antichain
from spate.ids import GlobalId, InstanceId


@dataclass(frozen=True, slots=True)
class _Active:
    name: str
    instance: InstanceId
    reads: frozenset[GlobalId]
    queue: asyncio.Queue[SubscribeResponse]


_ACTIVE: Final[dict[int, dict[GlobalId, _Active]]] = {}
"""Per runtime (by ``id``), the running subscribes by sink id. Entries live exactly as long as
their subscribe, so nothing outlives its runtime."""


def reads_of(catalog: CatalogState, ids: Iterable[GlobalId]) -> frozenset[GlobalId]:
    """``ids`` and every id a view among them reads, transitively."""
    out: set[GlobalId] = set()
    todo = list(ids)
    while todo:
        id = todo.pop()
        if id in out:
            continue
        out.add(id)
        item = catalog.find_id(id)
        if isinstance(item, ViewItem):
            todo.extend(item.plan.depends_on())
    return frozenset(out)


def register(
    runtime: object,
    sink: GlobalId,
    *,
    name: str,
    instance: InstanceId,
    reads: frozenset[GlobalId],
    queue: asyncio.Queue[SubscribeResponse],
) -> None:
    _ACTIVE.setdefault(id(runtime), {})[sink] = _Active(name, instance, reads, queue)


def unregister(runtime: object, sink: GlobalId) -> None:
    active = _ACTIVE.get(id(runtime))
    if active is not None:
        active.pop(sink, None)
        if not active:
            del _ACTIVE[id(runtime)]


def names(runtime: object) -> dict[GlobalId, str]:
    """The running subscribes by sink id: what each reads (a name, or ``query``)."""
    return {sink: sub.name for sink, sub in _ACTIVE.get(id(runtime), {}).items()}


def end_reading(runtime: object, dropped: Iterable[Item]) -> list[GlobalId]:
    """End every subscribe that reads one of ``dropped``; return their sink ids."""
    victims = {item.id: item for item in dropped}
    ended = []
    for sink, sub in list(_ACTIVE.get(id(runtime), {}).items()):
        hit = sorted(sub.reads & victims.keys())
        if not hit:
            continue
        item = victims[hit[0]]
        error = f"{kind_of(item)} {item.name} ({item.id}), which it reads, was dropped"
        empty = Antichain.empty()
        sub.queue.put_nowait(SubscribeResponse(sub.instance, sink, empty, empty, None, error))
        ended.append(sink)
    return ended
