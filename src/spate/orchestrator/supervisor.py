"""Supervision shared by the orchestrators: restart with backoff, online/offline events.

A subclass says how to run a service once (``_run_once``, returning the reason it ended) and how
to stop it (``_stop``); this base keeps the registry, the events and the restart loop, and the
services placed elsewhere (``ServiceConfig.address``), which it only registers. Another kind
of orchestrator (Kubernetes: a pod per service, its DNS name as the host) is another subclass.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from spate.orchestrator.service import (
    Service,
    ServiceConfig,
    ServiceError,
    ServiceEvent,
    ServiceMissing,
    ServiceStatus,
    split_address,
)
from spate.tasks import cancel_and_wait

_log: Final = logging.getLogger("spate.orchestrator")
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass
class Supervised:
    """One service under supervision."""

    name: str
    config: ServiceConfig
    service: Service
    dir: Path
    argv: list[str]
    task: asyncio.Task[None] | None = None
    pid: int | None = None
    restarts: int = 0
    status: ServiceStatus = "offline"
    events: list[ServiceEvent] = field(default_factory=list)
    handle: object = None
    """Whatever the orchestrator needs to stop the current run (a Process, a Task)."""
    placed: bool = False
    """Started elsewhere (``ServiceConfig.address``): never run or stopped here."""


class EventStream:
    """An async iterator of service events, subscribed from the moment it is created."""

    def __init__(self, watchers: list[asyncio.Queue[ServiceEvent]]) -> None:
        self._queue: asyncio.Queue[ServiceEvent] = asyncio.Queue()
        self._watchers = watchers
        watchers.append(self._queue)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> ServiceEvent:
        return await self._queue.get()

    def close(self) -> None:
        """Stop receiving events."""
        if self._queue in self._watchers:
            self._watchers.remove(self._queue)


class Supervisor(ABC):
    """The registry, the event stream and the restart loop of an orchestrator."""

    def __init__(
        self,
        *,
        backoff_initial: float = 0.25,
        backoff_max: float = 10.0,
        healthy_after: float = 30.0,
    ) -> None:
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._healthy_after = healthy_after
        self._services: dict[str, Supervised] = {}
        self._watchers: list[asyncio.Queue[ServiceEvent]] = []
        self._closed = False

    @abstractmethod
    def _prepare(self, name: str, config: ServiceConfig) -> Supervised:
        """Allocate ports, secret and directory for ``name``."""

    @abstractmethod
    async def _run_once(self, sup: Supervised) -> str:
        """Run the service until it ends; emit ``online`` when it serves; return why it ended."""

    @abstractmethod
    async def _stop(self, sup: Supervised) -> None:
        """Stop the current run of ``sup`` (if any) for good."""

    def _forget(self, sup: Supervised, *, remove_files: bool) -> None:
        """Remove a dropped service's directory (secret, ports, logs, a replica's scratch
        directory) unless told to keep it."""
        if not remove_files:
            return
        shutil.rmtree(sup.dir, ignore_errors=True)

    # -- public API ---------------------------------------------------------------------------

    async def ensure_service(self, name: str, config: ServiceConfig) -> Service:
        """Start ``name`` with ``config`` unless it already runs with exactly that config."""
        if self._closed:
            raise ServiceError("the orchestrator is closed")
        if not _NAME.fullmatch(name):
            raise ServiceError(
                f"invalid service name {name!r}: letters, digits, '_', '.', '-' (max 64)"
            )
        existing = self._services.get(name)
        if existing is not None:
            if existing.config == config:
                return existing.service
            await self.drop_service(name, remove_files=False)
        if config.address is not None:
            sup = self._placed(name, config, config.address)
            self._services[name] = sup
            self._emit(sup, "online", None, f"placed at {config.address}")
            return sup.service
        sup = self._prepare(name, config)
        self._services[name] = sup
        sup.task = asyncio.create_task(self._supervise(sup), name=f"supervise-{name}")
        return sup.service

    @staticmethod
    def _placed(name: str, config: ServiceConfig, address: str) -> Supervised:
        """A service started elsewhere: registered, never run (no directory, no process)."""
        host, port = split_address(address)
        service = Service(name, host, {config.ports[0]: port}, secret_file="")
        return Supervised(name, config, service, Path(), list(config.argv), placed=True)

    def placed(self, name: str) -> str | None:
        """``HOST:PORT`` if ``name`` is a service placed elsewhere, else ``None``."""
        sup = self._services.get(name)
        return None if sup is None or not sup.placed else sup.config.address

    async def drop_service(self, name: str, *, remove_files: bool = True) -> None:
        """Stop ``name`` for good and forget it."""
        sup = self._services.pop(name, None)
        if sup is None:
            known = ", ".join(sorted(self._services)) or "-"
            raise ServiceMissing(f"service {name!r} does not exist; services: {known}")
        if sup.placed:
            self._emit(sup, "offline", None, "dropped (it keeps running where it was placed)")
            return
        await self._cancel(sup)
        was_up = sup.status == "online" or sup.pid is not None
        pid = sup.pid
        await self._stop(sup)
        if was_up:
            self._emit(sup, "offline", pid, "dropped")
        self._forget(sup, remove_files=remove_files)

    def list_services(self) -> list[str]:
        return sorted(self._services)

    def service(self, name: str) -> Service:
        try:
            return self._services[name].service
        except KeyError:
            raise ServiceMissing(f"service {name!r} does not exist") from None

    def pid(self, name: str) -> int | None:
        """The current process id of ``name``, if it has one (tests kill it)."""
        sup = self._services.get(name)
        return None if sup is None else sup.pid

    def restarts(self, name: str) -> int:
        return self._services[name].restarts

    def status(self, name: str) -> ServiceStatus:
        return self._services[name].status

    def watch_services(self) -> EventStream:
        """Every event from the moment of this call; each watcher gets all of them, in order."""
        return EventStream(self._watchers)

    async def close(self, *, stop_services: bool = True) -> None:
        """Stop supervising; with ``stop_services=False`` the services keep running."""
        if self._closed:
            return
        self._closed = True
        for sup in list(self._services.values()):
            await self._cancel(sup)
            if stop_services and not sup.placed:
                await self._stop(sup)
        self._services.clear()

    # -- internals ----------------------------------------------------------------------------

    async def _cancel(self, sup: Supervised) -> None:
        if sup.task is not None:
            await cancel_and_wait([sup.task])
            sup.task = None

    def _emit(
        self, sup: Supervised, status: ServiceStatus, pid: int | None, reason: str | None
    ) -> None:
        sup.status = status
        event = ServiceEvent(sup.name, status, time.time_ns() // 1_000_000, pid, reason)
        sup.events.append(event)
        _log.info("service=%s status=%s pid=%s reason=%s", sup.name, status, pid, reason)
        for q in self._watchers:
            q.put_nowait(event)

    async def _supervise(self, sup: Supervised) -> None:
        backoff = self._backoff_initial
        while True:
            started = time.monotonic()
            reason = await self._run_once(sup)
            sup.pid = None
            sup.handle = None
            self._emit(sup, "offline", None, reason)
            if time.monotonic() - started >= self._healthy_after:
                backoff = self._backoff_initial
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._backoff_max)
            sup.restarts += 1
