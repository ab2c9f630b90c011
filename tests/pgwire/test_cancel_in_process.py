"""A statement evaluated in the server's process (no cluster: constants and table functions)
stops computing when it is canceled or times out: its worker thread is freed, not left to
finish what nobody will read. The server runs in the test's process, so the test counts the
evaluator's calls of md5 and sees them stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spate.environment.api import Environment
from spate.errors import QueryCanceled
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.plan.builder import col, lit
from spate.plan.evaluation import funcs
from spate.plan.evaluation.interrupt import EVERY, interruptible
from spate.plan.evaluation.relation import evaluate
from spate.plan.relation import Constant
from spate.repr import INT64, RelationDesc

# tens of seconds of per-row work in Python (three md5s a row), streamed through the filter
RUNAWAY = (
    "SELECT count(*) FROM generate_series(1, 3000000) AS g(x) WHERE md5(md5(md5(x::text))) < '0'"
)


@pytest.fixture
def dsn(tmp_path: Path) -> Iterator[str]:
    env = Environment.open(tmp_path / "env")
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield f"host=127.0.0.1 port={server.port} user=u dbname=spate sslmode=disable"
    finally:
        server.close()
        env.close()


@pytest.mark.parametrize("how", ["cancel", "statement_timeout"])
def test_a_canceled_in_process_statement_stops_computing(
    dsn: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = [0]  # md5 evaluations in this process (the server's evaluator runs here)
    real = funcs._md5

    def counted(text: str) -> str:
        calls[0] += 1
        return real(text)

    monkeypatch.setattr(funcs, "_md5", counted)
    with psycopg.connect(dsn, autocommit=True) as conn:
        if how == "statement_timeout":
            conn.execute("SET statement_timeout = '5s'")
        else:

            def cancel_once_computing() -> None:
                while calls[0] == 0:
                    time.sleep(0.05)
                conn.cancel_safe()

            threading.Thread(target=cancel_once_computing, daemon=True).start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute(RUNAWAY)
        # Stopped within the rows between two looks at the event (EVERY rows, 3 md5s each),
        # however slowly a loaded machine runs the worker thread meanwhile.
        at_error = calls[0]
        deadline = time.monotonic() + 20
        while True:
            before = calls[0]
            time.sleep(1.0)
            assert calls[0] - at_error <= 3 * EVERY, f"still computing: {calls[0] - at_error}"
            if calls[0] == before:
                break
            assert time.monotonic() < deadline, "the worker thread never stopped"
        settled = calls[0]
        assert settled < 3 * 3_000_000
        conn.execute("SET statement_timeout = 0")
        assert conn.execute("SELECT 1 + 1").fetchone() == (2,)


def test_an_evaluation_stops_once_its_event_is_set() -> None:
    desc = RelationDesc.of(("x", INT64, False))
    plan = Constant(tuple(((i,), 1) for i in range(3 * EVERY)), desc).map(y=col("x") + lit(1))
    stop = threading.Event()
    with interruptible(stop):
        assert len(evaluate(plan, {}, 0)) == 3 * EVERY  # not set: runs to the end
        stop.set()
        with pytest.raises(QueryCanceled):
            evaluate(plan, {}, 0)
    assert len(evaluate(plan, {}, 0)) == 3 * EVERY  # outside the block: nothing cancels it
