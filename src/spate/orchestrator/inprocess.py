"""The in-process orchestrator: services as asyncio tasks, for tests.

Same interface and events as :class:`~spate.orchestrator.process.ProcessOrchestrator`, but a
service is a coroutine produced by ``factory(name, config, service)``; it should serve on the
ports in ``service.ports`` until cancelled. A coroutine that raises is a crash: ``offline`` with
the exception, then a restart with backoff. ``kill(name)`` simulates ``kill -9``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from spate.orchestrator.process import allocate_port, port_open, write_secret
from spate.orchestrator.service import Service, ServiceConfig, ServiceMissing
from spate.orchestrator.supervisor import Supervised, Supervisor
from spate.tasks import cancel_and_wait

ServiceFactory = Callable[[str, ServiceConfig, Service], Coroutine[Any, Any, None]]


class InProcessOrchestrator(Supervisor):
    """Runs services as tasks of the current event loop."""

    def __init__(
        self,
        factory: ServiceFactory,
        *,
        root: Path | None = None,
        host: str = "127.0.0.1",
        backoff_initial: float = 0.05,
        backoff_max: float = 1.0,
    ) -> None:
        super().__init__(backoff_initial=backoff_initial, backoff_max=backoff_max)
        self._factory = factory
        self._root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="spate-"))
        self._host = host

    def _prepare(self, name: str, config: ServiceConfig) -> Supervised:
        sdir = self._root / "services" / name
        sdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        secret_file = sdir / "secret"
        if not secret_file.exists():
            write_secret(secret_file)
        ports = {p: allocate_port(self._host) for p in config.ports}
        service = Service(name, self._host, ports, str(secret_file))
        return Supervised(name, config, service, sdir, list(config.argv))

    async def _run_once(self, sup: Supervised) -> str:
        task = asyncio.create_task(self._factory(sup.name, sup.config, sup.service))
        sup.handle = task
        host, port = sup.service.address(sup.config.ports[0])
        try:
            while not task.done():
                if await port_open(host, port):
                    self._emit(sup, "online", None, None)
                    break
                await asyncio.wait({task}, timeout=0.05)
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.cancelled():
            return "killed"
        exc = task.exception()
        if exc is not None:
            return f"crashed: {type(exc).__name__}: {exc}"
        return "exited"

    async def _stop(self, sup: Supervised) -> None:
        task = sup.handle
        if isinstance(task, asyncio.Task):
            await cancel_and_wait([task])
        sup.handle = None

    async def kill(self, name: str) -> None:
        """End the current run of ``name`` abruptly (it will be restarted)."""
        sup = self._services.get(name)
        if sup is None:
            raise ServiceMissing(f"service {name!r} does not exist")
        task = sup.handle
        if isinstance(task, asyncio.Task):
            task.cancel()
