"""The SQL session variable ``recursion_limit``: the rounds a WITH RECURSIVE planned in the
session may take (``max_iterations`` of its plan), set, shown, reset, refused when not a
positive integer, and per session."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.sql import SqlError

_COUNT = (
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100) SELECT n FROM r"
)


def _shown(session: object) -> str:
    table = session.sql("SHOW recursion_limit")  # type: ignore[attr-defined]
    assert isinstance(table, pa.Table)
    return str(table.column(0)[0].as_py())


def _explained(session: object, sql: str) -> str:
    table = session.sql(f"EXPLAIN {sql}")  # type: ignore[attr-defined]
    assert isinstance(table, pa.Table)
    return "\n".join(str(v) for v in table.column(0).to_pylist())


def test_recursion_limit_is_a_positive_integer_session_variable(env: Environment) -> None:
    session, other = env.sql_session(), env.sql_session()
    assert _shown(session) == "10000"
    assert "max_iterations=10000" in _explained(session, _COUNT)
    session.sql("SET recursion_limit = 50")
    assert _shown(session) == "50"
    assert "max_iterations=50" in _explained(session, _COUNT)
    shown = session.sql("SHOW ALL")
    assert isinstance(shown, pa.Table)
    assert (
        dict(zip(*(c.to_pylist() for c in shown.columns), strict=True))["recursion_limit"] == "50"
    )
    assert _shown(other) == "10000"  # another session keeps its own
    for bad in ("0", "-3", "'many'", "'1.5'"):
        with pytest.raises(SqlError, match='invalid value for parameter "recursion_limit"'):
            session.sql(f"SET recursion_limit = {bad}")
        assert _shown(session) == "50"  # a refused SET changes nothing
    session.sql("SET recursion_limit TO '7'")
    assert "max_iterations=7" in _explained(session, f"CREATE VIEW counted AS {_COUNT}")
    session.sql("RESET recursion_limit")
    assert _shown(session) == "10000"
