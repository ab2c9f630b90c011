"""The local process orchestrator: replica services as supervised subprocesses on loopback.

Each service lives in ``<root>/services/<name>/``: ``secret`` (mode 0600), ``ports.json``
(allocated once, stable across restarts and across orchestrator instances), ``pid`` and
``service.log`` (stdout and stderr). A service's process runs in its own session (process
group), so stopping it also ends the children it started (a Spark driver's JVM).

A service whose process outlives the orchestrator (the environment restarted, the replicas did
not) is *adopted* by the next orchestrator that ensures it with the same command: it keeps
running, so the controller can reconnect and reconcile instead of rehydrating from scratch.
One that runs a different command (other settings: a grace period, Spark options) is
*superseded*: it is stopped before the new command starts. Left running, it would keep the
service's ports (the new process could not listen, and the controller would reach the old one
in its place) and outlive :meth:`~Supervisor.close`, which stops only the processes it knows.

Supervision (see :mod:`spate.orchestrator.supervisor`): ``online`` once the first port accepts
connections, ``offline`` when the process exits (naming the exit code or signal), then a
restart after a backoff that doubles up to ``backoff_max``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import time
from pathlib import Path
from typing import Final

from spate.orchestrator.service import (
    PORT_PLACEHOLDER_PREFIX,
    SECRET_FILE_PLACEHOLDER,
    SERVICE_DIR_PLACEHOLDER,
    Service,
    ServiceConfig,
)
from spate.orchestrator.supervisor import Supervised, Supervisor

_POLL: Final = 0.1
_log: Final = logging.getLogger("spate.orchestrator")


def allocate_port(host: str) -> int:
    """A port that was free a moment ago (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def write_secret(path: Path) -> None:
    """32 random bytes, hex, in a file only the owner can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(32))


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, readable by the owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def expand_argv(config: ServiceConfig, service: Service, service_dir: Path) -> list[str]:
    """Substitute ``{port:NAME}``, ``{secret_file}`` and ``{service_dir}`` in the command."""
    out = []
    for arg in config.argv:
        for name, port in service.ports.items():
            arg = arg.replace(f"{PORT_PLACEHOLDER_PREFIX}{name}}}", str(port))
        arg = arg.replace(SECRET_FILE_PLACEHOLDER, service.secret_file)
        arg = arg.replace(SERVICE_DIR_PLACEHOLDER, str(service_dir))
        out.append(arg)
    return out


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _cmdline(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


async def port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections at ``host:port``. A cancellation of the
    calling task while it probes raises, also when the connection was made in the same
    instant: Python 3.11's ``asyncio.wait_for`` then returns the connection and drops the
    cancellation (fixed in 3.12), and a supervisor stopped that way went on to wait for its
    process forever (an ``Environment.close`` hung with it)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    task = asyncio.current_task()
    if task is not None and task.cancelling():  # a cancel wait_for returned through
        raise asyncio.CancelledError
    return True


class ProcessOrchestrator(Supervisor):
    """Runs services as local subprocesses under ``root``; see the module docs."""

    def __init__(
        self,
        root: Path,
        *,
        host: str = "127.0.0.1",
        backoff_initial: float = 0.25,
        backoff_max: float = 10.0,
        healthy_after: float = 30.0,
        stop_timeout: float = 5.0,
    ) -> None:
        super().__init__(
            backoff_initial=backoff_initial, backoff_max=backoff_max, healthy_after=healthy_after
        )
        self._root = Path(root)
        self._host = host
        self._stop_timeout = stop_timeout
        self._adopt: dict[str, int] = {}
        self._superseded: dict[str, int] = {}

    def _prepare(self, name: str, config: ServiceConfig) -> Supervised:
        (self._root / "services").mkdir(parents=True, exist_ok=True, mode=0o700)
        sdir = self._root / "services" / name
        sdir.mkdir(exist_ok=True, mode=0o700)
        ports = self._ports(sdir, config.ports)
        secret_file = sdir / "secret"
        if not secret_file.exists():
            write_secret(secret_file)
        service = Service(name, self._host, ports, str(secret_file))
        argv = expand_argv(config, service, sdir)
        pid = self._running(sdir)
        if pid is not None and _cmdline(pid) == argv:
            self._adopt[name] = pid
        elif pid is not None and _is_service(pid):
            self._superseded[name] = pid
        return Supervised(name, config, service, sdir, argv)

    def _ports(self, sdir: Path, names: tuple[str, ...]) -> dict[str, int]:
        path = sdir / "ports.json"
        if path.exists():
            known = json.loads(path.read_text())
            if isinstance(known, dict) and sorted(known) == sorted(names):
                return {n: int(known[n]) for n in names}
        ports = {n: allocate_port(self._host) for n in names}
        write_private(path, json.dumps(ports))
        return ports

    @staticmethod
    def _running(sdir: Path) -> int | None:
        """The live process the service directory's pid file names, if any."""
        try:
            pid = int((sdir / "pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    async def _run_once(self, sup: Supervised) -> str:
        adopted = self._adopt.pop(sup.name, None)
        if adopted is not None:
            sup.pid = adopted
            self._emit(sup, "online", adopted, "adopted a running process")
            while pid_alive(adopted):
                await asyncio.sleep(_POLL)
            return "adopted process exited"
        superseded = self._superseded.pop(sup.name, None)
        if superseded is not None:
            _log.info("service=%s stopping pid %d: it runs another command", sup.name, superseded)
            await self._kill_group(superseded, None)
        env = dict(os.environ)
        env.update(sup.config.env)
        log_fd = os.open(sup.dir / "service.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(log_fd, "ab") as log:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *sup.argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=env,
                    start_new_session=True,
                )
            except OSError as e:
                return f"could not start: {e}"
        sup.pid = proc.pid
        sup.handle = proc
        write_private(sup.dir / "pid", str(proc.pid))
        host, port = sup.service.address(sup.config.ports[0])
        waiter = asyncio.ensure_future(proc.wait())
        try:
            while not waiter.done():
                if await port_open(host, port):
                    self._emit(sup, "online", proc.pid, None)
                    break
                await asyncio.wait({waiter}, timeout=_POLL)
            code = await asyncio.shield(waiter)
        except asyncio.CancelledError:
            waiter.cancel()  # the process may outlive supervision (close without stopping)
            raise
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exited with code {code}"

    async def _stop(self, sup: Supervised) -> None:
        """SIGTERM the service's process group; SIGKILL it if it lingers."""
        superseded = self._superseded.pop(sup.name, None)  # stopped before it was replaced
        if superseded is not None:
            await self._kill_group(superseded, None)
        pid = sup.pid
        if pid is None:
            return
        proc = sup.handle if isinstance(sup.handle, asyncio.subprocess.Process) else None
        await self._kill_group(pid, proc)
        sup.pid = None
        sup.handle = None
        with contextlib.suppress(FileNotFoundError):
            (sup.dir / "pid").unlink()

    async def _kill_group(self, pid: int, proc: asyncio.subprocess.Process | None) -> None:
        """SIGTERM ``pid``'s process group, SIGKILL if it lingers; return once it is gone."""
        for sig, wait in ((signal.SIGTERM, self._stop_timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            except PermissionError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if proc is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), timeout=wait)
                if proc.returncode is not None:
                    break
            else:
                deadline = time.monotonic() + wait
                while pid_alive(pid) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                if not pid_alive(pid):
                    break


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_service(pid: int) -> bool:
    """Whether ``pid`` runs a ``spate replica`` command (a pid file can outlive its process,
    and the pid be reused by an unrelated one)."""
    argv = _cmdline(pid)
    return argv is not None and "spate" in argv and "replica" in argv


def stop_services(root: Path, *, timeout: float = 10.0) -> list[tuple[str, int]]:
    """Stop every service process under ``<root>/services`` (and its process group: a Spark
    driver's JVM): SIGTERM, then SIGKILL after ``timeout`` seconds. Returns the
    ``(service, pid)`` pairs that were running. For processes that outlived their orchestrator
    (``spate stop``); a running orchestrator would restart them."""
    found: list[tuple[str, int, Path]] = []
    services = root / "services"
    for sdir in sorted(services.iterdir()) if services.is_dir() else []:
        try:
            pid = int((sdir / "pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if pid_alive(pid) and _is_service(pid):
            found.append((sdir.name, pid, sdir))
    for _, pid, _ in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_group_alive(pid) for _, pid, _ in found) and time.monotonic() < deadline:
        time.sleep(0.1)
    for _, pid, _ in found:
        if _group_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    for _, pid, sdir in found:
        while _group_alive(pid) and time.monotonic() < deadline + 5.0:
            time.sleep(0.05)
        with contextlib.suppress(FileNotFoundError):
            (sdir / "pid").unlink()
    return [(name, pid) for name, pid, _ in found]
