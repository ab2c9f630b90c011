"""Services: what an orchestrator runs, and the events it reports.

An orchestrator keeps named *services* (replica processes) running. ``ensure_service(name,
config)`` is idempotent: the same config leaves a running service alone; a different config
restarts it with the new one. A service's ports are allocated once and stay stable across
restarts, so a controller can keep reconnecting to the same address. Every service gets a
secret (32 random bytes, hex) that the controller and the replica share for authentication; it
reaches the replica through a file readable only by the owner, never through argv, the
environment or logs.

``watch_services()`` yields ``ServiceEvent``s: ``online`` when a process accepts connections on
its first port, ``offline`` when it exits (with the reason). A crashed service is restarted with
exponential backoff. A service *placed elsewhere* (``ServiceConfig.address``) is only
registered: every orchestrator reports it ``online`` at that address and runs nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from spate.errors import UsageError

PORT_PLACEHOLDER_PREFIX = "{port:"
"""In ``ServiceConfig.argv``, ``{port:NAME}`` becomes the allocated port named NAME."""
SECRET_FILE_PLACEHOLDER = "{secret_file}"  # noqa: S105 - a placeholder, not a secret
"""In ``ServiceConfig.argv``, the path of the service's secret file."""
SERVICE_DIR_PLACEHOLDER = "{service_dir}"
"""In ``ServiceConfig.argv``, the service's own directory (scratch space, logs)."""


class ServiceError(UsageError, ValueError):
    """A service request that cannot be carried out (unknown name, bad config)."""


class ServiceMissing(ServiceError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """How to run one service.

    ``argv`` may contain ``{port:NAME}`` (for each name in ``ports``), ``{secret_file}`` and
    ``{service_dir}``; they are substituted at every start. ``env`` is added to the
    orchestrator's environment.
    """

    argv: tuple[str, ...]
    ports: tuple[str, ...] = ("listen",)
    env: Mapping[str, str] = field(default_factory=dict)
    address: str | None = None
    """``HOST:PORT`` of a service *placed elsewhere*: started by someone else (the user,
    systemd, a cluster manager) with ``argv`` (shown, never run), listening there on its first
    port. The orchestrator runs nothing and stops nothing; the controller that connects to it
    supervises it (health, reconnection, rehydration)."""

    def __post_init__(self) -> None:
        if not self.argv:
            raise ServiceError("a service needs a command (argv is empty)")
        if not self.ports:
            raise ServiceError("a service needs at least one named port")
        if len(set(self.ports)) != len(self.ports):
            raise ServiceError(f"duplicate port names: {', '.join(self.ports)}")
        if self.address is not None:
            split_address(self.address)

    def __hash__(self) -> int:
        return hash((self.argv, self.ports, tuple(sorted(self.env.items())), self.address))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ServiceConfig)
            and self.argv == other.argv
            and self.ports == other.ports
            and dict(self.env) == dict(other.env)
            and self.address == other.address
        )


def split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``) as ``(host, port)``; ``ServiceError`` if malformed."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ServiceError(f"a service address must be HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class Service:
    """A running (or restarting) service: where to reach it and how to authenticate."""

    name: str
    host: str
    ports: Mapping[str, int]
    secret_file: str

    def address(self, port: str = "listen") -> tuple[str, int]:
        try:
            return (self.host, self.ports[port])
        except KeyError:
            raise ServiceError(
                f"service {self.name} has no port {port!r}; ports: {', '.join(self.ports)}"
            ) from None

    def secret(self) -> bytes:
        with open(self.secret_file, encoding="ascii") as f:
            return bytes.fromhex(f.read().strip())


ServiceStatus = Literal["online", "offline"]


@dataclass(frozen=True, slots=True)
class ServiceEvent:
    """A service changed status at ``time_ms`` (wall clock)."""

    name: str
    status: ServiceStatus
    time_ms: int
    pid: int | None = None
    reason: str | None = None


class Orchestrator(Protocol):
    """Keeps named services running (spec: the orchestrator behind replica creation)."""

    async def ensure_service(self, name: str, config: ServiceConfig) -> Service: ...

    async def drop_service(self, name: str) -> None: ...

    def list_services(self) -> list[str]: ...

    def watch_services(self) -> AsyncIterator[ServiceEvent]:
        """Events from the moment of the call on (subscribed eagerly, nothing is missed)."""
        ...

    async def close(self) -> None: ...
