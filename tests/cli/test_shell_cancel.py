"""Ctrl-C in the shell cancels what the environment is doing for it: the call it waits for is
canceled on the environment's event loop, and a SUBSCRIBE stops cleanly (its wait for the
next batch canceled, its stream closed, without ``aclose(): asynchronous generator is already
running``)."""

from __future__ import annotations

import asyncio
import io
import signal
import threading
from collections.abc import AsyncGenerator, Iterator

import pytest
from rich.console import Console

from spate.cli.sql import show
from spate.environment.api import Environment
from spate.environment.changes import Changes


@pytest.fixture(autouse=True)
def _sigint_interrupts() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here, as in the interactive shell (which takes it even
    when started with SIGINT ignored): the tests send the user's Ctrl-C as SIGINT."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("cancel") / "env")
    try:
        yield e
    finally:
        e.close()


def _ctrl_c_in(seconds: float) -> threading.Timer:
    """The user's Ctrl-C, ``seconds`` from now, to the main thread (which waits meanwhile)."""
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_cancels_the_call_on_the_event_loop(env: Environment) -> None:
    canceled = threading.Event()

    async def long_read() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            canceled.set()
            raise

    timer = _ctrl_c_in(1.0)
    with pytest.raises(KeyboardInterrupt):
        env._run(long_read(), None)
    timer.join()
    assert canceled.wait(10)


def test_ctrl_c_stops_a_subscribe_and_closes_its_stream(env: Environment) -> None:
    closed = threading.Event()

    async def stream() -> AsyncGenerator[Changes, None]:
        try:
            yield Changes([], 1)
            await asyncio.Event().wait()  # no further change comes
        finally:
            closed.set()

    changes = env._changes(stream(), None)
    timer = _ctrl_c_in(1.0)  # while the shell waits for the second batch
    out = io.StringIO()
    show(Console(file=out, width=120), changes)
    timer.join()
    assert out.getvalue() == "Cancel request sent\n"
    assert closed.is_set()
