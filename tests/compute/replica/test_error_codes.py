"""The SQLSTATE of an error a replica raises travels as data: each peek and subscribe error
answer carries the code of the error behind it (a division by zero ``22012``, text that is not
an integer ``22P02``, a one-off refused as too large ``53200``), or none when the read could not
be served at all; readers take the code from that field, never from the message. No Spark: the
replica's state machine, and its runtime and server over a stand-in renderer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from spate.codec import decode_message, encode_message
from spate.compute.replica.actions import (
    BuildDataflow,
    DataflowFailed,
    PeekFinished,
    RunPeek,
    Stepped,
)
from spate.errors import (
    EvaluationFailed,
    OutOfMemory,
    Problem,
    ReadFailed,
    error_record,
    reported,
)
from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.pgwire.errors import sqlstate_of
from spate.plan.dataflow import DataflowDescription
from spate.protocol.compute import (
    CreateDataflow,
    IndexTarget,
    PeekError,
    PeekResponse,
    Schedule,
    SubscribeBatch,
    SubscribeResponse,
)
from spate.render.errors import raised_marker, raised_sqlstate
from spate.testing.replica_driver import rows_of

from .fake_render import FakeIndex
from .helpers import Harness, index_dataflow, of_type, peek, sent, sink_dataflow
from .tables import Tables
from .test_server import serving
from .views import KV, table_index

IX = GlobalId.user(42)
DIVISION: str = "materialized view v: division by zero [SQLSTATE 22012] evaluating (a / b)"
CAST: str = 'query: invalid input syntax for type integer: "x"'


def _over_the_wire(response: object) -> object:
    return decode_message(b"".join(bytes(c) for c in encode_message(response)))


def _started(h: Harness, df: DataflowDescription) -> int:
    out = h.connect([CreateDataflow(df), *(Schedule(i) for i in df.export_ids())])
    h.build_all(out)
    (build,) = of_type(out, BuildDataflow)
    assert isinstance(build, BuildDataflow)
    return build.key


def test_a_peeks_evaluation_error_is_answered_with_its_sqlstate() -> None:
    h = Harness()
    key = _started(h, index_dataflow(IX, 0))
    h.step(key, 10)
    p = peek(IX, 5, 1)
    assert len(of_type(h.cmd(p), RunPeek)) == 1
    finished = PeekFinished(h.epoch, p.uuid, None, DIVISION, "22012", "division by zero")
    out = sent(h.event(finished))
    assert out == [PeekResponse(p.uuid, PeekError(DIVISION, "22012", "division by zero"))]
    assert _over_the_wire(out[0]) == out[0]


def test_a_read_that_cannot_be_served_has_no_sqlstate() -> None:
    h = Harness()
    key = _started(h, index_dataflow(IX, 0))
    h.step(key, 10)
    p = peek(IX, 5, 1)
    h.cmd(p)
    (answer,) = sent(h.event(PeekFinished(h.epoch, p.uuid, error="collection gone")))
    assert answer == PeekResponse(p.uuid, PeekError("collection gone", None))


def test_a_subscribe_ended_by_an_evaluation_error_carries_its_sqlstate() -> None:
    h = Harness()
    s = GlobalId.transient(3)
    key = _started(h, sink_dataflow(s, 10, subscribe=True))
    h.step(key, 12)
    error = Problem(CAST, "22P02", 'invalid input syntax for type integer: "x"')
    out = sent(h.event(Stepped(key, Antichain.of(14), {}, error)))
    (batch,) = [r for r in out if isinstance(r, SubscribeResponse)]
    assert isinstance(batch.response, SubscribeBatch) and batch.response.updates is None
    assert batch.response.error == f"collection {s}: {CAST}"
    assert batch.response.error_sqlstate == "22P02"
    assert batch.response.error_pg_message == 'invalid input syntax for type integer: "x"'
    assert _over_the_wire(batch) == batch


def test_a_one_off_refused_as_too_large_fails_its_waiting_peeks_with_53200() -> None:
    h = Harness()
    key = _started(h, index_dataflow(IX, 0))
    p = peek(IX, 5, 1)
    assert sent(h.cmd(p)) == []  # waits: the index has not reached 5
    out = sent(h.event(DataflowFailed(key, "one-off read u42: out of memory", "53200")))
    (answer,) = [r for r in out if isinstance(r, PeekResponse)]
    assert isinstance(answer.response, PeekError) and answer.response.sqlstate == "53200"
    assert answer.response.message == f"collection {IX} failed: one-off read u42: out of memory"


def test_a_replicas_code_becomes_the_readers_error_and_the_wires_sqlstate() -> None:
    division = reported(Problem(f"df3: {DIVISION}", "22012", "division by zero"))
    assert isinstance(division, EvaluationFailed) and sqlstate_of(division) == "22012"
    assert division.pg_message == "division by zero"  # the field's, not the message's
    assert sqlstate_of(reported(Problem(CAST, "22P02"))) == "22P02"
    assert isinstance(reported(Problem("too big", "53200")), OutOfMemory)
    # the code is the field's, whatever the message says
    assert sqlstate_of(reported(Problem("text naming [SQLSTATE 22012]", "22P02"))) == "22P02"
    unserved = reported(Problem("below the since [SQLSTATE 22012]", None))
    assert type(unserved) is ReadFailed and sqlstate_of(unserved) == "55000"


def test_an_error_collections_record_gives_its_sqlstate() -> None:
    record = error_record("22P02", 'invalid input syntax for type integer: "x"', "s::int", "()")
    problem = Problem.of_record("query", record)
    assert problem.sqlstate == "22P02"
    assert problem.pg_message == 'invalid input syntax for type integer: "x"'
    failed = EvaluationFailed.of_record("query", record)
    assert failed.sqlstate == "22P02" and str(failed) == problem.message


def test_a_spark_jobs_raised_error_gives_the_code_its_raise_error_marked() -> None:
    text = f"division by zero{raised_marker('22012')}"
    job = RuntimeError(f"[USER_RAISED_EXCEPTION] {text} SQLSTATE: P0001")
    assert raised_sqlstate(job) == "22012"
    assert raised_sqlstate(RuntimeError("executor lost")) is None


class _DividingIndex(FakeIndex):
    """An index whose reads meet an evaluation error (its error collection is not empty)."""

    def peek(self, export: GlobalId, **kwargs: object) -> pa.Table:  # type: ignore[override]
        raise EvaluationFailed(f"{export}: {DIVISION}", "22012", "division by zero")


async def test_the_replica_answers_a_failing_peek_with_its_code_over_the_wire(
    tmp_path: Path,
) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    ix, bad = GlobalId.user(10), GlobalId.user(11)
    async with serving(tmp_path, tables) as s:
        d = await s.driver(1)
        await d.start([CreateDataflow(table_index(t, ix, 0)), Schedule(ix)])
        await d.wait_frontier(ix, 0)
        assert rows_of(await d.peek(d.new_peek(IndexTarget(ix), 0, KV))) == [((1, 1), 1)]
        runtime = s.replica.runtime  # type: ignore[attr-defined]
        runtime._renderer = _DividingIndex
        await d.send(CreateDataflow(table_index(t, bad, 0)), Schedule(bad))
        await d.wait_frontier(bad, 0)
        answer = await d.peek(d.new_peek(IndexTarget(bad), 0, KV))
        assert isinstance(answer.response, PeekError)
        assert answer.response.sqlstate == "22012" and DIVISION in answer.response.message
        assert answer.response.pg_message == "division by zero"
        await d.close()
    tables.close()
