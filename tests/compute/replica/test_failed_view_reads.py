"""Reads of a materialized view whose dataflow failed for good, on the pure state machine."""

from __future__ import annotations

import uuid

from spate.compute.replica.actions import AbortPeek, DataflowFailed
from spate.ids import GlobalId, PeekId, ShardId
from spate.plan.finishing import RowSetFinishing
from spate.protocol.compute import Peek, PeekError, PeekResponse, PersistTarget

from .helpers import D, Harness, sent, sink_dataflow
from .test_reconcile import first_connection


def test_a_read_of_a_failed_materialized_view_fails_with_its_error() -> None:
    """Reads of a view whose dataflow failed for good fail with the dataflow's error, both
    those already waiting and those that come later; they no longer wait forever."""
    mv = GlobalId.user(77)
    h = Harness()
    key = first_connection(h, sink_dataflow(mv, 10, subscribe=False))[mv]
    target = PersistTarget(mv, ShardId(uuid.UUID(int=mv.value)), D)
    waiting = Peek(target, PeekId(uuid.UUID(int=1)), 50, RowSetFinishing(), D)
    h.cmd(waiting)
    out = h.event(DataflowFailed(key, "sum overflowed int64"))
    answers = [r for r in sent(out) if isinstance(r, PeekResponse)]
    assert [a.uuid for a in answers] == [waiting.uuid]
    assert isinstance(answers[0].response, PeekError)
    assert "sum overflowed int64" in answers[0].response.message
    assert AbortPeek(waiting.uuid) in out
    later = Peek(target, PeekId(uuid.UUID(int=2)), 60, RowSetFinishing(), D)
    (answer,) = [r for r in sent(h.cmd(later)) if isinstance(r, PeekResponse)]
    assert isinstance(answer.response, PeekError)
    assert "materialized view" in answer.response.message
