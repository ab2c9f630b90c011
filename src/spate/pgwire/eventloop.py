"""The server's event loop: uvloop's where it is installed, else asyncio's own.

uvloop runs the loop, the sockets and the transports in C (libuv): a connection's read, its
parse and its write at Sync cost the loop a fraction of what asyncio's selector loop costs in
Python, and a one-connection prepared lookup's round trip is that much shorter. Nothing in the
server depends on which loop it runs on (streams, ``start_tls``, ``run_in_executor`` behave
alike); without uvloop (not installed, or a platform it does not build on) the server runs on
asyncio's loop, unchanged. ``SPATE_PGWIRE_LOOP=asyncio`` picks asyncio's loop even with uvloop
installed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

T = TypeVar("T")

ENV_VAR: Final = "SPATE_PGWIRE_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes the server's event loop: uvloop's ``new_event_loop`` if uvloop can be
    imported and ``SPATE_PGWIRE_LOOP`` is not ``asyncio``; else asyncio's."""
    if os.environ.get(ENV_VAR, "").strip().lower() == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:  # not installed, or not built for this platform
        return asyncio.new_event_loop
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop for the server (:func:`loop_factory`'s)."""
    return loop_factory()()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the server's event loop (:func:`loop_factory`'s)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
