"""Latency marks: where the time between a write and its visible change goes (off by default).

When the environment variable ``SPATE_LATENCY_TRACE`` names a file, :func:`mark` appends one
line per event to it: ``stage<TAB>subject<TAB>value<TAB>wall_ns<TAB>pid``. ``value`` is the
timestamp or upper the event is about (a write's ``ts``, a shard's new upper, a step's upper),
``subject`` what it is about (a shard id, a dataflow name). The wall clock (``time.time_ns``)
is shared by every process of the machine, so marks from the environment and its replicas
line up; each line is one ``write`` of an ``O_APPEND`` descriptor, so processes do not
interleave within a line. Replicas inherit the variable from the environment's process.

With the variable unset, :func:`mark` is one global test: nothing is opened or written.
:func:`enable` sets it from inside a process (for the replicas it starts afterwards too);
``bench/e2e.py`` reads the file back into a per-stage table (``bench/_breakdown.py``).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Final

ENV_VAR: Final = "SPATE_LATENCY_TRACE"

_path: str | None = os.environ.get(ENV_VAR) or None
_fd: int | None = None
_lock: Final = threading.Lock()


def enable(path: str) -> None:
    """Record marks to ``path`` from now on, here and in the processes started afterwards."""
    global _path, _fd
    with _lock:
        os.environ[ENV_VAR] = path
        _path = path
        if _fd is not None:
            os.close(_fd)
            _fd = None


def enabled() -> bool:
    """Whether marks are recorded (``SPATE_LATENCY_TRACE`` was set at import)."""
    return _path is not None


def mark(stage: str, subject: object, value: int) -> None:
    """Record that ``stage`` happened now for ``subject`` at ``value`` (module docs)."""
    path = _path
    if path is None:
        return
    global _fd
    line = f"{stage}\t{subject}\t{value}\t{time.time_ns()}\t{os.getpid()}\n".encode()
    with _lock:
        if _fd is None:
            _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(_fd, line)
