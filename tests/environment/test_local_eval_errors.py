"""Reads evaluated in this process (no dataflow: a constant ``SELECT``, a map/filter over one
table's rows, an UPDATE's new values) fail as a dataflow's read does: with
:class:`~spate.errors.EvaluationFailed` and PostgreSQL's SQLSTATE, which pgwire sends (they used to
raise ``EvalError``). No replica runs here: none of these reads needs one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import EvaluationFailed


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    with Environment.open(tmp_path / "data") as e:
        yield e


def test_constant_division_by_zero_is_evaluation_failed_with_22012(env: Environment) -> None:
    with pytest.raises(EvaluationFailed, match="division by zero") as caught:
        env.sql("SELECT 1 / 0")
    assert caught.value.sqlstate == "22012"
    with pytest.raises(EvaluationFailed) as caught:
        env.sql("SELECT 9223372036854775807 + 1")
    assert caught.value.sqlstate == "22003"


def test_update_evaluated_in_process_fails_as_a_read_naming_the_table(env: Environment) -> None:
    env.sql("CREATE TABLE t (a bigint NOT NULL, b bigint NOT NULL)")
    env.sql("INSERT INTO t VALUES (6, 0)")
    with pytest.raises(EvaluationFailed, match="division by zero") as caught:
        env.sql("UPDATE t SET a = a / b")
    assert caught.value.sqlstate == "22012"
    assert "t" in str(caught.value) and "b=0" in str(caught.value)
    assert env.sql("SELECT * FROM t").to_pylist() == [{"a": 6, "b": 0}]  # type: ignore[union-attr]


def test_pgwire_sends_22012_for_a_constant_division_by_zero(env: Environment) -> None:
    import psycopg

    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import ServerConfig, ServerThread

    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as c:
            with pytest.raises(psycopg.errors.DivisionByZero) as caught:
                c.execute("SELECT 1/0")
            assert caught.value.sqlstate == "22012"
            assert c.execute("SELECT 1").fetchall() == [(1,)]  # the session survives
    finally:
        server.close()
