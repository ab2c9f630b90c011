"""The process orchestrator with real subprocesses on loopback."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from spate.orchestrator import (
    InProcessOrchestrator,
    ProcessOrchestrator,
    Service,
    ServiceConfig,
    ServiceError,
    ServiceEvent,
    ServiceMissing,
)
from spate.orchestrator.process import pid_alive

pytestmark = pytest.mark.integration

# A tiny "replica": listens on its port, proves it can read its secret, optionally spawns a child.
SERVER = r"""
import os, socket, subprocess, sys, time
port, secret_file, child = int(sys.argv[1]), sys.argv[2], sys.argv[3]
assert len(bytes.fromhex(open(secret_file).read())) == 32
if child != "-":
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    open(child, "w").write(str(p.pid))
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen()
while True:
    c, _ = s.accept(); c.close()
"""


def server_config(child: str = "-") -> ServiceConfig:
    return ServiceConfig(
        argv=(sys.executable, "-c", SERVER, "{port:listen}", "{secret_file}", child)
    )


async def next_event(
    events: AsyncIterator[ServiceEvent], status: str, timeout: float = 20
) -> ServiceEvent:
    async def find() -> ServiceEvent:
        async for e in events:
            if e.status == status:
                return e
        raise AssertionError("event stream ended")

    return await asyncio.wait_for(find(), timeout)


@pytest.fixture
async def orch(tmp_path: Path) -> AsyncIterator[ProcessOrchestrator]:
    o = ProcessOrchestrator(tmp_path, backoff_initial=0.05, backoff_max=0.5)
    yield o
    await o.close()


async def test_service_comes_online_with_stable_port_and_private_secret(
    orch: ProcessOrchestrator,
) -> None:
    events = orch.watch_services()
    service = await orch.ensure_service("r1", server_config())
    online = await next_event(events, "online")
    assert online.name == "r1" and online.pid == orch.pid("r1")
    host, port = service.address()
    with socket.create_connection((host, port), timeout=5):
        pass
    mode = stat.S_IMODE(os.stat(service.secret_file).st_mode)
    assert mode == 0o600
    assert len(service.secret()) == 32
    # The secret's value never appears on the command line (only its path does).
    cmdline = Path(f"/proc/{orch.pid('r1')}/cmdline").read_text()
    assert service.secret().hex() not in cmdline
    # Ensuring the same config again is a no-op.
    again = await orch.ensure_service("r1", server_config())
    assert again == service and orch.restarts("r1") == 0
    assert orch.list_services() == ["r1"]


async def test_killed_service_is_restarted_on_the_same_port(orch: ProcessOrchestrator) -> None:
    events = orch.watch_services()
    service = await orch.ensure_service("r1", server_config())
    first = await next_event(events, "online")
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    offline = await next_event(events, "offline")
    assert offline.reason == "killed by signal SIGKILL"
    second = await next_event(events, "online")
    assert second.pid != first.pid
    assert orch.restarts("r1") == 1
    with socket.create_connection(service.address(), timeout=5):
        pass


async def test_crash_loop_backs_off(tmp_path: Path) -> None:
    orch = ProcessOrchestrator(tmp_path, backoff_initial=0.05, backoff_max=0.4)
    try:
        events = orch.watch_services()
        await orch.ensure_service(
            "bad", ServiceConfig(argv=(sys.executable, "-c", "raise SystemExit(3)"))
        )
        first = await next_event(events, "offline")
        assert first.reason == "exited with code 3"
        await asyncio.sleep(1.5)
        # 0.05 + 0.1 + 0.2 + 0.4 + 0.4 + ... : a handful of restarts, not hundreds.
        assert 2 <= orch.restarts("bad") <= 8
    finally:
        await orch.close()


async def test_drop_stops_the_whole_process_group_and_forgets(
    orch: ProcessOrchestrator, tmp_path: Path
) -> None:
    events = orch.watch_services()
    child_file = tmp_path / "child.pid"
    service = await orch.ensure_service("r1", server_config(str(child_file)))
    online = await next_event(events, "online")
    child = int(child_file.read_text())
    assert pid_alive(child)
    await orch.drop_service("r1")
    dropped = await next_event(events, "offline")
    assert dropped.reason == "dropped"
    assert online.pid is not None and not pid_alive(online.pid)
    for _ in range(50):
        if not pid_alive(child):
            break
        await asyncio.sleep(0.1)
    assert not pid_alive(child)
    assert not Path(service.secret_file).exists()
    assert orch.list_services() == []
    with pytest.raises(ServiceMissing, match="service 'r1' does not exist"):
        await orch.drop_service("r1")


async def test_changed_config_restarts_and_bad_names_are_refused(orch: ProcessOrchestrator) -> None:
    events = orch.watch_services()
    await orch.ensure_service("r1", server_config())
    first = await next_event(events, "online")
    changed = ServiceConfig(argv=(*server_config().argv, "extra"), env={"X": "1"})
    await orch.ensure_service("r1", changed)
    second = await next_event(events, "online")
    assert first.pid != second.pid
    with pytest.raises(ServiceError, match="invalid service name"):
        await orch.ensure_service("../etc", server_config())
    with pytest.raises(ServiceError, match="argv is empty"):
        ServiceConfig(argv=())


async def test_a_new_orchestrator_adopts_running_services(tmp_path: Path) -> None:
    a = ProcessOrchestrator(tmp_path, backoff_initial=0.05)
    events = a.watch_services()
    service = await a.ensure_service("r1", server_config())
    online = await next_event(events, "online")
    await a.close(stop_services=False)
    assert online.pid is not None and pid_alive(online.pid)

    b = ProcessOrchestrator(tmp_path, backoff_initial=0.05)
    try:
        events_b = b.watch_services()
        adopted = await b.ensure_service("r1", server_config())
        assert adopted.ports == service.ports and adopted.secret() == service.secret()
        again = await next_event(events_b, "online")
        assert again.pid == online.pid and again.reason == "adopted a running process"
        # The adopted process is supervised: when it dies, it is restarted as a child.
        os.kill(online.pid, signal.SIGKILL)
        await next_event(events_b, "offline")
        restarted = await next_event(events_b, "online")
        assert restarted.pid != online.pid
    finally:
        await b.close()


async def test_a_service_running_another_command_is_stopped_and_replaced(tmp_path: Path) -> None:
    """A process left running with other settings (a pipeline run keeps its replica with a
    longer grace period) holds the service's ports: the next orchestrator stops it before it
    starts its own command, and its close then leaves no process behind."""
    # the words that mark a spate replica's command line (only those are ever stopped)
    old_config = ServiceConfig(argv=(*server_config().argv, "spate", "replica", "--old"))
    a = ProcessOrchestrator(tmp_path, backoff_initial=0.05)
    events = a.watch_services()
    await a.ensure_service("r1", old_config)
    old = await next_event(events, "online")
    await a.close(stop_services=False)
    assert old.pid is not None and pid_alive(old.pid)

    new_config = ServiceConfig(argv=(*server_config().argv, "spate", "replica", "--new"))
    b = ProcessOrchestrator(tmp_path, backoff_initial=0.05)
    events_b = b.watch_services()
    service = await b.ensure_service("r1", new_config)
    new = await next_event(events_b, "online")
    assert new.pid != old.pid and not pid_alive(old.pid)
    assert Path(f"/proc/{new.pid}/cmdline").read_bytes().endswith(b"--new\0")
    with socket.create_connection(service.address(), timeout=5):
        pass
    await b.close()
    assert new.pid is not None and not pid_alive(new.pid)


async def test_in_process_orchestrator_restarts_crashed_and_killed_services() -> None:
    runs: list[str] = []

    async def factory(name: str, config: ServiceConfig, service: Service) -> None:
        runs.append(name)
        server = await asyncio.start_server(lambda r, w: w.close(), *service.address())
        try:
            if len(runs) == 1:
                await asyncio.sleep(0.2)
                raise RuntimeError("boom")
            await asyncio.Event().wait()
        finally:
            server.close()

    orch = InProcessOrchestrator(factory, backoff_initial=0.01)
    try:
        events = orch.watch_services()
        await orch.ensure_service("c1", ServiceConfig(argv=("compute",)))
        await next_event(events, "online")
        crashed = await next_event(events, "offline")
        assert crashed.reason == "crashed: RuntimeError: boom"
        await next_event(events, "online")
        await orch.kill("c1")
        killed = await next_event(events, "offline")
        assert killed.reason == "killed"
        await next_event(events, "online")
        assert orch.restarts("c1") == 2
    finally:
        await orch.close()
