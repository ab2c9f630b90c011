"""Waiting for hydration: every materialized view and index computed by a replica.

A dataflow *hydrates* when a replica has computed its contents as of its start (for a view over
a large input, this is where the time goes: starting the replica's Spark driver, then the first
batch job); until then reads of it wait. :func:`wait_hydrated` polls ``status()`` until every
view and index of a cluster with replicas has hydrated on at least one replica.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spate.environment.status import EnvironmentStatus
from spate.errors import SpateError


class HydrationTimeout(SpateError, TimeoutError):
    """Not every view and index hydrated in time (the message names those that did not)."""


def pending(status: EnvironmentStatus) -> list[str]:
    """The views and indexes not hydrated yet (on clusters with replicas)."""
    serving = {r.cluster for r in status.replicas}
    return [
        c.name
        for c in status.collections
        if c.hydrated is False and c.cluster is not None and c.cluster in serving
    ]


def wait_hydrated(
    status: Callable[[], EnvironmentStatus],
    timeout: float,
    progress: Callable[[EnvironmentStatus], None] | None = None,
    *,
    poll_s: float = 0.5,
) -> EnvironmentStatus:
    """Poll ``status()`` until nothing is :func:`pending`; call ``progress`` with each status.
    Raises :class:`HydrationTimeout` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        s = status()
        if progress is not None:
            progress(s)
        waiting = pending(s)
        if not waiting:
            return s
        if time.monotonic() >= deadline:
            replicas = ", ".join(f"{r.cluster}.{r.name}: {r.health}" for r in s.replicas) or "-"
            raise HydrationTimeout(
                f"not hydrated after {timeout:g} s: {', '.join(waiting)} (replicas: {replicas})"
            )
        time.sleep(poll_s)
