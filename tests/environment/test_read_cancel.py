"""A read's caller can cancel it: ``Environment.select(cancel=…)`` and the peek it waits for.

Without a cluster (no JVM): a read at a time its table has not reached waits; setting its
cancel event ends it at once with :class:`QueryCanceled` (57014), and the environment carries
on. A peek's future is cancelled when the read waiting for it is cancelled, which frees the
peek's read hold (so the one-off dataflow behind it can be dropped).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from spate.environment.api import Environment
from spate.environment.view_failures import await_answer
from spate.errors import QueryCanceled
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64


def test_setting_cancel_ends_a_waiting_read_with_57014(env: Environment) -> None:
    env.create_table("t", RelationDesc.of(("a", INT64, False)))
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(QueryCanceled) as e:
        env.select("t", as_of=2**62, timeout=30, cancel=cancel)
    assert time.monotonic() - started < 2
    assert e.value.sqlstate == "57014"
    env.insert("t", [(1,)])
    assert env.select("t", cancel=threading.Event()).num_rows == 1  # unset: no effect


async def test_a_cancelled_wait_for_an_answer_cancels_the_answer() -> None:
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(await_answer(None, answer, 60, []))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert answer.cancelled()
