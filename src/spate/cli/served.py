"""The server that serves a data directory: ``spate serve`` announces itself in
``<data_dir>/serving.json`` while it runs, and ``spate sql`` connects to it instead of opening
the environment a second time (a second open would fence the server out).

The file holds the server's process id, host and port and whether it asks for a password
(never the password); it is private to its user and removed when the server stops. A file left
by a server that died (its process gone, or nothing listening on its port) is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

FILE: Final = "serving.json"


@dataclass(frozen=True, slots=True)
class Served:
    """Where a running ``spate serve`` of a data directory listens."""

    pid: int
    host: str
    port: int
    password: bool
    """Whether clients must send a password."""

    @property
    def connect_host(self) -> str:
        """The address a local client connects to (a wildcard listen address is loopback)."""
        wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104
        return wildcard.get(self.host, self.host)


@contextlib.contextmanager
def announce(data_dir: Path, served: Served) -> Iterator[None]:
    """Write ``served`` to ``data_dir``'s file (mode 0600, atomically) for the duration of
    the block; remove it after, unless another server replaced it meanwhile."""
    path = data_dir / FILE
    tmp = data_dir / f".{FILE}.{served.pid}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(served), f)
    os.replace(tmp, path)
    try:
        yield
    finally:
        if read(data_dir) == served:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def read(data_dir: Path) -> Served | None:
    """What ``data_dir``'s file says (``None``: no file, or not one a server wrote)."""
    try:
        doc = json.loads((data_dir / FILE).read_text())
        served = Served(
            pid=doc["pid"], host=doc["host"], port=doc["port"], password=doc["password"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    fields = ((served.pid, int), (served.port, int), (served.host, str), (served.password, bool))
    if any(isinstance(v, bool) is not (t is bool) or not isinstance(v, t) for v, t in fields):
        return None
    return served


def find(data_dir: Path, timeout: float = 1.0) -> Served | None:
    """The server serving ``data_dir`` now: its file names a live process that accepts
    connections on its port; else ``None``."""
    served = read(data_dir)
    if served is None or not _alive(served.pid):
        return None
    try:
        with socket.create_connection((served.connect_host, served.port), timeout=timeout):
            return served
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: alive
        return True
    return True
