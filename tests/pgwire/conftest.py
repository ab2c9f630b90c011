from __future__ import annotations

from collections.abc import Iterator

import pytest

from spate.pgwire.server import ServerConfig, ServerThread
from tests.pgwire.fake_engine import FakeEngine


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def server(engine: FakeEngine) -> Iterator[ServerThread]:
    s = ServerThread(engine, ServerConfig(port=0, max_message_bytes=64 * 1024))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def dsn(server: ServerThread) -> str:
    return f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
