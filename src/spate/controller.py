"""The combined controller: storage and compute behind one ``ready()`` / ``process()`` loop.

The compute controller sees storage only through the ``StorageCollections`` interface, which the
storage controller implements: read holds on storage collections at their earliest since, their
frontiers, and shard metadata. This module owns both and drives them together:

* ``ready()`` returns as soon as either controller has work (cancel-safe);
* ``process()`` lets each controller that is ready do its work and returns what came out:
  storage frontier updates and compute responses (peek notifications, subscribe batches,
  frontier uppers). Peek *rows* go straight to the caller through the future ``peek`` returns.

It is the one place where compute responses are routed: subscribers register a queue per
subscribe id and receive its batches; everything else is returned to the caller of ``process``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from spate.compute.controller.controller import ComputeController
from spate.compute.controller.responses import (
    ComputeControllerResponse,
    FrontierUpper,
    SubscribeResponse,
)
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId
from spate.storage.controller.controller import StorageController
from spate.storage.controller.driver import FrontierUpdates


@dataclass(frozen=True, slots=True)
class ControllerResponses:
    """What one ``process()`` produced."""

    storage_uppers: tuple[tuple[GlobalId, Frontier], ...] = ()
    compute: tuple[ComputeControllerResponse, ...] = ()

    def is_empty(self) -> bool:
        return not self.storage_uppers and not self.compute


@dataclass
class _Subscription:
    queue: asyncio.Queue[SubscribeResponse]
    done: bool = False


@dataclass
class Controller:
    """Storage + compute controllers, one loop. See the module docs."""

    storage: StorageController
    compute: ComputeController
    _subscriptions: dict[GlobalId, _Subscription] = field(default_factory=dict)
    _compute_uppers: dict[GlobalId, Frontier] = field(default_factory=dict)
    """Uppers of compute collections (indexes) as last reported; a storage collection's upper
    is only ever the storage controller's."""
    _upper_changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def ready(self) -> None:
        """Return once ``process`` has work on either side. Cancel-safe."""
        tasks = {
            asyncio.ensure_future(self.storage.ready()),
            asyncio.ensure_future(self.compute.ready()),
        }
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            # Let them finish. asyncio.wait never swallows a cancellation of *this* task (a
            # suppress(CancelledError) around ``await task`` would, and this loop would then
            # never stop).
            await asyncio.wait(tasks)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def process(self) -> ControllerResponses:
        """Do the pending work of both controllers; route subscribe batches; return the rest."""
        uppers: list[tuple[GlobalId, Frontier]] = []
        storage_out = await self.storage.process()
        if isinstance(storage_out, FrontierUpdates):
            uppers.extend(storage_out.updates)
        compute_out: list[ComputeControllerResponse] = []
        response = await self.compute.process()
        while response is not None:
            if isinstance(response, SubscribeResponse) and response.id in self._subscriptions:
                self._subscriptions[response.id].queue.put_nowait(response)
            else:
                compute_out.append(response)
            if isinstance(response, FrontierUpper):
                uppers.append((response.id, response.upper))
                self._compute_uppers[response.id] = response.upper
            response = self.compute.process_now()
        if uppers:
            self._upper_changed.set()
        return ControllerResponses(tuple(uppers), tuple(compute_out))

    async def run(self) -> None:
        """Drive both controllers until cancelled."""
        while True:
            await self.ready()
            await self.process()

    # -- routing ---------------------------------------------------------------------------------

    def subscribe_queue(self, id: GlobalId) -> asyncio.Queue[SubscribeResponse]:
        """Receive the batches of subscribe ``id`` (register before creating its dataflow)."""
        sub = _Subscription(asyncio.Queue())
        self._subscriptions[id] = sub
        return sub.queue

    def forget_subscribe(self, id: GlobalId) -> None:
        self._subscriptions.pop(id, None)

    async def wait_for_uppers(self, ids: Iterable[GlobalId], beyond: int, timeout: float) -> None:
        """Wait until every id's upper (as last reported) is beyond ``beyond``."""
        wanted = list(ids)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        def missing() -> list[GlobalId]:
            out = []
            for id in wanted:
                upper = self._known_upper(id)
                if upper is None or not _beyond(upper, beyond):
                    out.append(id)
            return out

        while missing():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    "timed out waiting for "
                    + ", ".join(f"{i} (upper {self._known_upper(i)})" for i in missing())
                    + f" to pass {beyond}"
                )
            self._upper_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._upper_changed.wait(), timeout=min(remaining, 0.5))

    def _known_upper(self, id: GlobalId) -> Frontier | None:
        with contextlib.suppress(KeyError):
            return self.storage.collection_frontiers(id).upper
        return self._compute_uppers.get(id)


def _beyond(upper: Frontier, time: int) -> bool:
    """``upper > time``: everything at ``time`` is final."""
    return not upper.less_equal(time)
