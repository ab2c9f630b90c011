"""A supervisor's port probe never drops a cancellation (spate.orchestrator.process.port_open):
cancelled in the instant its connection is made, it raises. (Python 3.11's asyncio.wait_for
returns the connection then; the supervisor carried on and Environment.close hung.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from spate.orchestrator import process


class _Writer:
    closed = False

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        return None


def test_a_probe_cancelled_as_its_connection_is_made_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writer = _Writer()

    async def main() -> None:
        connecting = asyncio.Event()

        async def open_connection(host: str, port: int) -> tuple[Any, _Writer]:
            connecting.set()
            await asyncio.sleep(0)  # done in the loop's next round: as the cancel arrives
            return None, writer

        monkeypatch.setattr(asyncio, "open_connection", open_connection)
        probe = asyncio.ensure_future(process.port_open("127.0.0.1", 1))
        await connecting.wait()
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
        assert writer.closed  # the connection made is closed all the same

    asyncio.run(main())


def test_a_probe_not_cancelled_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    async def open_connection(host: str, port: int) -> tuple[Any, _Writer]:
        return None, _Writer()

    async def refused(host: str, port: int) -> tuple[Any, _Writer]:
        raise ConnectionRefusedError

    monkeypatch.setattr(asyncio, "open_connection", open_connection)
    assert asyncio.run(process.port_open("127.0.0.1", 1)) is True
    monkeypatch.setattr(asyncio, "open_connection", refused)
    assert asyncio.run(process.port_open("127.0.0.1", 1)) is False
