"""``SHOW`` in ``Environment.sql`` shows what ``current_setting`` shows for a setting the
session has not set (``server_version_num``, which clients read on connect)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.sql import SqlError


def _one(table: object) -> object:
    assert isinstance(table, pa.Table)
    return table.to_pylist()[0]


def test_show_as_current_setting(env: Environment) -> None:
    for name in ("server_version_num", "server_version", "search_path"):
        shown = _one(env.sql(f"SHOW {name}"))
        current = _one(env.sql(f"SELECT current_setting('{name}') AS {name}"))
        assert shown == current, name
    assert _one(env.sql("SHOW server_version_num")) == {"server_version_num": "150000"}
    with pytest.raises(SqlError) as e:
        env.sql("SHOW no_such_setting")
    assert e.value.sqlstate == "42704"
