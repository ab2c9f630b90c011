"""Named crash points for fault tests: a process kills itself with SIGKILL at an armed point.

Arm points in a child process with the environment variable ``SPATE_PERSIST_CRASH_AT``: a
comma-separated list of ``name`` (crash the first time) or ``name@n`` (crash the n-th time).
Points in persist (and in the storage controller, which writes through it):

================================  ============================================================
``persist.after_blob_set``        a batch blob is durable; the CaS that would reference it is not
``persist.before_cas``            about to CaS a new state (an append)
``persist.after_cas_before_ack``  the append committed; the caller has not been told
``consensus.mid_batch_cas``       a batched compare-and-set ran its first op; not committed
``gc.mid_physical_delete``        GC deleted some but not all unreferenced blobs
``gc.after_logical_delete``       GC truncated old consensus states
``storage.append.before_intent``  a multi-table append's data is staged; its intent not committed
``storage.append.after_intent``   a multi-table append's intent committed; no shard written
``storage.append.after_shard``    one table of a multi-table append written (n-th: n tables)
``storage.append.after_apply``    every table written; the intent not yet cleared
================================  ============================================================

Unarmed points cost one dict lookup.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Final

ENV: Final = "SPATE_PERSIST_CRASH_AT"

POINTS: Final = frozenset(
    {
        "persist.after_blob_set",
        "persist.before_cas",
        "persist.after_cas_before_ack",
        "consensus.mid_batch_cas",
        "gc.mid_physical_delete",
        "gc.after_logical_delete",
        "storage.append.before_intent",
        "storage.append.after_intent",
        "storage.append.after_shard",
        "storage.append.after_apply",
    }
)


def _parse(text: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, count = item.partition("@")
        if name not in POINTS:
            raise ValueError(f"{ENV}: unknown crash point {name!r}; known: {sorted(POINTS)}")
        armed[name] = int(count) if count else 1
    return armed


_armed: dict[str, int] = _parse(os.environ.get(ENV, ""))
_hits: dict[str, int] = {}
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """Die with SIGKILL here if ``name`` is armed and this is its n-th hit."""
    if not _armed:
        return
    target = _armed.get(name)
    if target is None:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        hit = _hits[name]
    if hit == target:
        os.kill(os.getpid(), signal.SIGKILL)
