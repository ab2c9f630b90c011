"""Separate "hosts" on this machine: Linux network namespaces joined by veth pairs.

:class:`Hosts` creates one namespace per host, each with its own loopback and one interface
(``eth0``, ``10.231.0.X/24``) whose veth peer sits on a bridge in an extra ``infra``
namespace (``10.231.0.1``). Hosts reach one another and the infra address, nothing else: the
root namespace (this machine's network) is not connected. Processes are started in a host
with ``ip netns exec``; :meth:`Hosts.kill_host` kills every process of a host (what losing
the machine looks like), :meth:`Hosts.close` every process of every host, then the
namespaces (their interfaces go with them).

:meth:`Hosts.forward` exposes a loopback service of this machine (the test PostgreSQL) inside
the network without touching its configuration or this machine's interfaces: the listening
socket is created inside the infra namespace (``setns`` on a helper thread), each accepted
connection is relayed to the loopback address from this process. Nothing is sent to any
address but loopback and the namespaces' own.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and ``ip``; :func:`unavailable_reason` says why
not when it cannot work.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

SUBNET: Final = "10.231.0"
INFRA_IP: Final = f"{SUBNET}.1"
_CLONE_NEWNET: Final = 0x40000000


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable_reason() -> str | None:
    """Why namespaces cannot be created here (``None`` if they can)."""
    if shutil.which("ip") is None:
        return "the 'ip' command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_NET_ADMIN); not running as root"
    name = f"spmhprobe{os.getpid()}"
    probe = _ip("netns", "add", name, check=False)
    if probe.returncode != 0:
        return f"'ip netns add' failed: {probe.stderr.strip()}"
    _ip("netns", "del", name, check=False)
    return None


def _ns_pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def cleanup_stale(prefix: str = "spmh") -> None:
    """Delete namespaces (and their processes) left by an earlier run that was killed."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(prefix):
            continue
        owner = name[len(prefix) :].split("-")[0]
        if owner.isdigit() and Path(f"/proc/{owner}").exists():
            continue  # a live run's
        for pid in _ns_pids(name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _ip("netns", "del", name, check=False)


class Hosts:
    """Namespaces as hosts (module docs). Use as a context manager."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = f"spmh{os.getpid()}-"
        self.ips: dict[str, str] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        self._infra = self.prefix + "infra"
        self._listeners: list[socket.socket] = []
        self._closed = threading.Event()
        root.mkdir(parents=True, exist_ok=True)

    def ns(self, host: str) -> str:
        return self._infra if host == "infra" else self.prefix + host

    def __enter__(self) -> Hosts:
        try:
            _ip("netns", "add", self._infra)
            _ip("-n", self._infra, "link", "set", "lo", "up")
            _ip("-n", self._infra, "link", "add", "br0", "type", "bridge")
            _ip("-n", self._infra, "addr", "add", f"{INFRA_IP}/24", "dev", "br0")
            _ip("-n", self._infra, "link", "set", "br0", "up")
            self.ips["infra"] = INFRA_IP
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, host: str, last_octet: int) -> str:
        """A host ``host`` at ``10.231.0.<last_octet>``; returns its address."""
        ns, ip = self.ns(host), f"{SUBNET}.{last_octet}"
        peer = f"v{last_octet}"
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", peer,
            "netns", self._infra)  # fmt: skip
        _ip("-n", self._infra, "link", "set", peer, "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        self.ips[host] = ip
        return ip

    def spawn(
        self, host: str, name: str, argv: Sequence[str], env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        """Run ``argv`` on ``host`` (own session; output to ``<root>/<name>.log``)."""
        with open(self.root / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns(host), *argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def log(self, name: str, tail: int = 60) -> str:
        try:
            lines = (self.root / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-tail:])

    def pids(self, host: str) -> list[int]:
        return _ns_pids(self.ns(host))

    def kill_host(self, host: str) -> list[int]:
        """SIGKILL every process running in ``host``; returns their pids."""
        pids = self.pids(host)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.pids(host) and time.monotonic() < deadline:
            time.sleep(0.1)
        return pids

    def forward(self, port: int, upstream: tuple[str, int]) -> None:
        """Relay ``INFRA_IP:port`` (inside the network) to ``upstream`` (loopback here)."""
        made: dict[str, socket.socket | BaseException] = {}

        def listen_inside() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
            target = os.open(f"/var/run/netns/{self._infra}", os.O_RDONLY)
            try:
                if libc.setns(target, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns into the infra namespace")
                try:
                    s = socket.socket()
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((INFRA_IP, port))
                    s.listen(64)
                    made["socket"] = s
                finally:
                    if libc.setns(own, _CLONE_NEWNET) != 0:  # back, before anything else
                        os._exit(70)
            except BaseException as e:
                made["error"] = e
            finally:
                os.close(own)
                os.close(target)

        t = threading.Thread(target=listen_inside)
        t.start()
        t.join()
        if "error" in made:
            raise made["error"]  # type: ignore[misc]
        listener = made["socket"]
        assert isinstance(listener, socket.socket)
        self._listeners.append(listener)
        threading.Thread(target=self._accept, args=(listener, upstream), daemon=True).start()

    def _accept(self, listener: socket.socket, upstream: tuple[str, int]) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(upstream, timeout=10)
            except OSError:
                conn.close()
                continue
            up.settimeout(None)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        """Kill every process of every host, stop relaying, delete the namespaces."""
        self._closed.set()
        for s in self._listeners:
            with contextlib.suppress(OSError):
                s.close()
        for host in [*self.ips, "infra"]:
            for pid in _ns_pids(self.ns(host)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)
        for host in [h for h in self.ips if h != "infra"]:
            _ip("netns", "del", self.ns(host), check=False)
        _ip("netns", "del", self._infra, check=False)
        self.ips.clear()

    def remaining(self) -> list[str]:
        """This run's namespaces that still exist (after :meth:`close`: none)."""
        out = _ip("netns", "list", check=False).stdout.split()
        return [n for n in out if n.startswith(self.prefix)]


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
