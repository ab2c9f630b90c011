"""A webhook source is a source in the catalog: SHOW SOURCES lists it (SHOW TABLES does not),
``spate_catalog.objects`` says ``source``, DROP TABLE refuses it (42809) and DROP SOURCE drops
it; a POST is still written durably before its 200. A data directory whose webhook source an
older version kept as a plain table opens with it as a source."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest

from spate.config import Settings
from spate.environment.api import Environment
from spate.environment.definitions import SqlDefinition
from spate.repr.desc import RelationDesc
from spate.repr.types import TEXT
from spate.sql.errors import SqlError

CREATE = "CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT"


def _names(env: Environment, sql: str) -> list[str]:
    result = env.sql(sql)
    assert isinstance(result, pa.Table)
    return [str(v) for v in result.column(0).to_pylist()]


def _kind(env: Environment, name: str) -> str:
    result = env.sql(f"SELECT type FROM spate_catalog.objects WHERE name = '{name}'")
    assert isinstance(result, pa.Table)
    return str(result.column(0)[0].as_py())


def test_a_webhook_source_is_a_source(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", webhook_port=0)
    with Environment.open(settings=settings) as env:
        env.sql(CREATE)
        env.sql("CREATE TABLE t (a int)")
        assert "w" in _names(env, "SHOW SOURCES")
        assert "w" not in _names(env, "SHOW TABLES")
        assert _kind(env, "w") == "source"
        url = env.webhook_url
        assert url is not None
        request = urllib.request.Request(f"{url}/materialize/public/w", b"hello", method="POST")
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.status == 200
        assert _names(env, "SELECT body FROM w") == ["hello"]  # durable when answered
        with pytest.raises(SqlError, match='"w" is a source, not a table') as refused:
            env.sql("DROP TABLE w")
        assert refused.value.sqlstate == "42809"
        assert refused.value.hint == "Use DROP SOURCE to remove a source."
        with pytest.raises(SqlError) as written:
            env.sql("INSERT INTO w VALUES ('x')")
        assert "w" in str(written.value)
        env.sql("DROP SOURCE w")
        assert "w" not in _names(env, "SHOW SOURCES")
        assert "t" in _names(env, "SHOW TABLES")


def test_a_webhook_source_kept_as_a_table_opens_as_a_source(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        # What an older version committed: a table with the webhook source's CREATE text.
        env.create_table("w", RelationDesc.of(("body", TEXT)), definition=SqlDefinition(CREATE))
        assert _kind(env, "w") == "table"
    with Environment.open(data) as env:
        assert _kind(env, "w") == "source"
        assert "w" in _names(env, "SHOW SOURCES")
        env.sql("DROP SOURCE w")
        assert "w" not in env.names()


def _post(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_a_webhook_source_has_a_row_in_source_statistics(tmp_path: Path) -> None:
    """Accepted POSTs are its rows and bytes; a body that is not JSON and one over the size
    limit are its errors, the latest one's reason its last error."""
    settings = Settings(data_dir=tmp_path / "data", webhook_port=0, webhook_max_body_bytes=64)
    with Environment.open(settings=settings) as env:
        env.sql("CREATE SOURCE j FROM WEBHOOK BODY FORMAT JSON")
        url = f"{env.webhook_url}/materialize/public/j"
        bodies = [b'{"a": 1}', b'{"a": 22}', b"[1, 2, 3]"]
        assert [_post(url, b) for b in bodies] == [200, 200, 200]
        assert _post(url, b"{not json") == 400
        assert _post(url, b"x" * 65) == 413
        query = (
            "SELECT name, status, rows, bytes, errors, last_error, committed_frontier "
            "FROM spate_catalog.source_statistics WHERE name = 'j'"
        )
        deadline = time.monotonic() + 60
        rows: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            result = env.sql(query)
            assert isinstance(result, pa.Table)
            rows = result.to_pylist()
            if rows and rows[0]["errors"] == 2:
                break
            time.sleep(0.5)
        assert len(rows) == 1, rows
        row = rows[0]
        assert row["status"] == "running"
        assert row["rows"] == 3
        assert row["bytes"] == sum(len(b) for b in bodies)
        assert row["errors"] == 2
        assert row["last_error"] == "the body is over 64 bytes"
        assert isinstance(row["committed_frontier"], int)
        # Dropped and created again under its name: a new source, counted from zero.
        env.sql("DROP SOURCE j")
        env.sql("CREATE SOURCE j FROM WEBHOOK BODY FORMAT JSON")
        assert _post(url, b'{"b": 1}') == 200
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            result = env.sql(query)
            assert isinstance(result, pa.Table)
            rows = result.to_pylist()
            if len(rows) == 1 and rows[0]["rows"] == 1:
                break
            time.sleep(0.5)
        assert [(r["rows"], r["bytes"], r["errors"]) for r in rows] == [(1, 8, 0)]
