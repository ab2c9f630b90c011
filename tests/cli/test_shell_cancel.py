"""Ctrl-C on a SUBSCRIBE in the shell stops it cleanly: the wait for the next batch is
canceled and the stream closed, without ``aclose(): asynchronous generator is already
running``."""

from __future__ import annotations

import asyncio
import io
import signal
import threading
from collections.abc import AsyncGenerator
from pathlib import Path

from rich.console import Console

from spate.cli.sql import show
from spate.environment.api import Environment
from spate.environment.changes import Changes


def test_ctrl_c_stops_a_subscribe_and_closes_its_stream(tmp_path: Path) -> None:
    closed = threading.Event()

    async def stream() -> AsyncGenerator[Changes, None]:
        try:
            yield Changes([], 1)
            await asyncio.Event().wait()  # no further change comes
        finally:
            closed.set()

    env = Environment.open(tmp_path / "env")
    try:
        changes = env._changes(stream(), None)
        main = threading.main_thread().ident
        assert main is not None
        timer = threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT))
        timer.start()  # the user's Ctrl-C, while the shell waits for the second batch
        out = io.StringIO()
        show(Console(file=out, width=120), changes)
        timer.join()
        assert out.getvalue() == "Cancel request sent\n"
        assert closed.is_set()
    finally:
        env.close()
