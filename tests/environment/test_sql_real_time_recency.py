"""The SQL session variable ``real_time_recency``: set, shown, reset, refused when not a
Boolean, and per session (the reads it changes are tested against PostgreSQL sources in
tests/storage/integration/test_postgres_source_reads.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.sql import SqlError


def _shown(session: object) -> str:
    table = session.sql("SHOW real_time_recency")  # type: ignore[attr-defined]
    assert isinstance(table, pa.Table)
    return str(table.column(0)[0].as_py())


def test_real_time_recency_is_a_boolean_session_variable(env: Environment) -> None:
    session, other = env.sql_session(), env.sql_session()
    assert _shown(session) == "off"
    for value, shown in [("true", "on"), ("off", "off"), ("'on'", "on"), ("0", "off"), ("y", "on")]:
        session.sql(f"SET real_time_recency = {value}")
        assert _shown(session) == shown, value
    assert _shown(other) == "off"  # another session keeps its own
    for bad in ("'maybe'", "'o'", "2"):
        with pytest.raises(SqlError, match='parameter "real_time_recency" requires a Boolean'):
            session.sql(f"SET real_time_recency = {bad}")
        assert _shown(session) == "on"  # a refused SET changes nothing
    session.sql("RESET real_time_recency")
    assert _shown(session) == "off"
