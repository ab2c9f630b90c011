"""Stopping asyncio tasks without swallowing the caller's own cancellation.

``with suppress(CancelledError): await task`` after ``task.cancel()`` looks harmless but is a
trap: if the *calling* task is cancelled while it waits there, that cancellation is swallowed
too and the caller carries on as if nothing happened (a loop that can then never be stopped).
:func:`cancel_and_wait` cancels, then waits with ``asyncio.wait``, which never raises the
awaited tasks' exceptions and always propagates a cancellation of the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until they have all finished (their errors are discarded)."""
    pending = list(tasks)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)
    for t in pending:
        if not t.cancelled():
            t.exception()  # mark retrieved: a task that failed while stopping is not news
