"""A connection (``CREATE CONNECTION``) is a dependency of the sources and sinks made with it:
DROP CONNECTION refuses while one exists (2BP01; with CASCADE, which does not drop sources and
sinks, 0A000), also after a reopen, and changes nothing; once they are dropped it goes."""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from spate.environment.api import Environment
from spate.sql import SqlError


def test_drop_connection_waits_for_the_sink_that_uses_it(tmp_path: Path, postgres_url: str) -> None:
    url = urlsplit(postgres_url)
    target = f"conn_in_use_{uuid.uuid4().hex[:8]}"
    data = tmp_path / "data"
    try:
        with Environment.open(data) as env:
            env.sql("CREATE TABLE t (k int, v text)")
            env.sql(
                f"CREATE CONNECTION pg TO POSTGRES (HOST '{url.hostname}', PORT {url.port or 5432},"
                f" USER '{url.username or 'postgres'}', DATABASE '{url.path.lstrip('/')}')"
            )
            env.sql(f"CREATE SINK out FROM t INTO POSTGRES CONNECTION pg (TABLE '{target}', "
                    "MODE 'changelog')")  # fmt: skip
            with pytest.raises(SqlError, match='cannot drop connection "pg": out uses it') as e:
                env.sql("DROP CONNECTION pg")
            assert e.value.sqlstate == "2BP01"
            assert e.value.hint == "Drop the sources and sinks that use it first."
            with pytest.raises(SqlError, match="out uses it") as cascade:
                env.sql("DROP CONNECTION pg CASCADE")
            assert cascade.value.sqlstate == "0A000"
        with Environment.open(data) as env:
            with pytest.raises(SqlError, match="out uses it"):
                env.sql("DROP CONNECTION pg")
            env.sql("DROP SINK out")
            env.sql("DROP CONNECTION pg")
            assert env.runtime.catalog.connection("pg") is None
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as pg:
            pg.execute(f"DROP TABLE IF EXISTS {target}")
