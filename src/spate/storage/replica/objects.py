"""One running ingestion or sink inside a storage replica: its task, its thread, its status.

The blocking work (a runner's ``step``) runs in a thread. Stopping an object cancels its task
and then *waits for the step in flight* before closing the runner, so a runner is never closed
under a running step.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from spate.ids import GlobalId
from spate.protocol.storage import ObjectStatus, RunIngestion, RunSink
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.replica.sink import SinkRunner

T = TypeVar("T")


@dataclass
class RunningObject:
    """An ingestion or a sink that the replica runs."""

    id: GlobalId
    command: RunIngestion | RunSink
    runner: IngestionRunner | SinkRunner | None = None
    task: asyncio.Task[None] | None = None
    inflight: asyncio.Future[Any] | None = None
    status: ObjectStatus | None = None
    error: str | None = None
    collections: tuple[GlobalId, ...] = field(default_factory=tuple)

    @property
    def kind(self) -> str:
        return "source" if isinstance(self.command, RunIngestion) else "sink"

    async def in_thread(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a thread; if the caller is cancelled, the call still completes before
        the cancellation propagates (so :meth:`stop` never races it)."""
        fut: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(fn))
        self.inflight = fut
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await fut
            raise
        finally:
            self.inflight = None

    async def stop(self) -> None:
        """Cancel the task, wait for the step in flight, close the runner."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
        if self.inflight is not None:
            with contextlib.suppress(BaseException):
                await self.inflight
        runner = self.runner
        self.runner = None
        if runner is not None:
            await asyncio.to_thread(runner.close)
