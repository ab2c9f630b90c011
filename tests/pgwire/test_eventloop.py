"""The server's event loop: uvloop's where it is installed, asyncio's when asked for."""

from __future__ import annotations

import asyncio
import sys

import psycopg
import pytest

from spate.pgwire import eventloop
from spate.pgwire.server import ServerConfig, ServerThread
from tests.pgwire.fake_engine import FakeEngine

if sys.platform == "win32":  # uvloop is a dependency everywhere else (pyproject.toml)
    pytest.skip("uvloop does not build on Windows", allow_module_level=True)
import uvloop


def test_the_server_loop_is_uvloops_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV_VAR, raising=False)
    loop = eventloop.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_asyncio_loop_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloop.ENV_VAR, "asyncio")
    loop = eventloop.new_event_loop()
    try:
        assert not isinstance(loop, uvloop.Loop)
        assert isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()


def test_run_runs_on_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def kind() -> bool:
        return isinstance(asyncio.get_running_loop(), uvloop.Loop)

    monkeypatch.delenv(eventloop.ENV_VAR, raising=False)
    assert eventloop.run(kind()) is True
    monkeypatch.setenv(eventloop.ENV_VAR, "asyncio")
    assert eventloop.run(kind()) is False


@pytest.mark.parametrize("choice", ["", "asyncio"])
def test_server_thread_serves_prepared_queries_on_either_loop(
    monkeypatch: pytest.MonkeyPatch, choice: str
) -> None:
    monkeypatch.setenv(eventloop.ENV_VAR, choice)
    server = ServerThread(FakeEngine(), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={server.port} user=u dbname=d sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as conn:
            for i in range(3):
                got = conn.execute("SELECT * FROM t WHERE id = %s", (i,), prepare=True).fetchall()
                assert [r[0] for r in got] == [i]
    finally:
        server.close()
