"""Closing an environment ends the calls other threads are waiting for: they raise
``EnvironmentClosed`` at once instead of waiting out their timeout."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import EnvironmentClosed
from spate.repr import INT64, RelationDesc


def test_a_read_waiting_for_a_future_time_ends_when_the_environment_closes(
    tmp_path: Path,
) -> None:
    env = Environment.open(tmp_path / "data")
    env.create_table("t", RelationDesc.of(("k", INT64, False)))
    env.insert("t", [(1,)])
    raised: list[BaseException] = []
    started = threading.Event()

    def read() -> None:
        started.set()
        try:
            env.select("t", as_of=2**62, timeout=600)  # a time the table reaches in ages
        except BaseException as e:
            raised.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started.wait()
    _until_a_select_runs_on(env)
    env.close()
    reader.join(timeout=60)  # far below the read's 600 s: it must not wait that out
    assert not reader.is_alive(), "the read still waits after close()"
    assert len(raised) == 1 and isinstance(raised[0], EnvironmentClosed), raised
    assert "closed while this call waited" in str(raised[0])
    with pytest.raises(EnvironmentClosed):
        env.names()


def _until_a_select_runs_on(env: Environment) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        tasks = asyncio.all_tasks(env._loop)
        if any(t.get_coro().__name__ == "select" for t in tasks):  # type: ignore[union-attr]
            return
        time.sleep(0.01)
    raise AssertionError("the read never started on the environment's loop")
