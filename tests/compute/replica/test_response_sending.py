"""The replica's response sender: a response too large for a frame becomes an error answer to
that read alone; any other failure to send is logged and resets the connection (never a sender
that died silently on a connection that still looks alive)."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from spate.compute.replica.metrics import ReplicaMetrics
from spate.compute.replica.server import _Outbox
from spate.ids import PeekId
from spate.protocol.compute import PeekError, PeekResponse, PeekRows
from spate.protocol.errors import FrameTooLarge


class _Conn:
    """A connection double: refuses what ``refuse`` says, records the rest."""

    epoch = 1
    peer = "test"

    def __init__(self, refuse: type[BaseException]) -> None:
        self.refuse = refuse
        self.sent: list[object] = []
        self.closed = False

    async def send(self, message: object) -> None:
        if isinstance(message, PeekResponse) and isinstance(message.response, PeekRows):
            if self.refuse is FrameTooLarge:
                raise FrameTooLarge(70_000_000, 64 * 1024 * 1024, authenticated=True)
            raise self.refuse("cannot encode")
        self.sent.append(message)

    async def close(self) -> None:
        self.closed = True


def _rows_response(n: int) -> PeekResponse:
    import pyarrow as pa

    return PeekResponse(PeekId(uuid.UUID(int=n)), PeekRows(pa.table({"_diff": [1]})))


async def test_an_oversized_peek_answer_becomes_an_error_for_that_peek() -> None:
    conn = _Conn(FrameTooLarge)
    box = _Outbox(conn, ReplicaMetrics("r-test"))  # type: ignore[arg-type]
    box.put(_rows_response(1))
    await asyncio.sleep(0.05)
    await box.stop()
    (answer,) = conn.sent
    assert isinstance(answer, PeekResponse) and isinstance(answer.response, PeekError)
    assert "exceeds the largest frame" in answer.response.message
    assert not conn.closed


async def test_a_failed_send_is_logged_and_resets_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, "spate.compute.replica")
    conn = _Conn(ValueError)
    box = _Outbox(conn, ReplicaMetrics("r-test"))  # type: ignore[arg-type]
    box.put(_rows_response(2))
    await asyncio.wait_for(box.task, 2.0)
    assert conn.closed
    assert "sending PeekResponse failed; resetting the connection" in caplog.text
