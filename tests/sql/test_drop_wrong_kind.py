"""DROP of an object under another kind's statement is refused as PostgreSQL refuses it: 42809,
with PostgreSQL's hint naming the statement that drops it; nothing is dropped."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from spate.environment.api import Environment
from spate.sql.errors import SqlError

# (the object's kind, how it is made, the wrong DROP)
CASES = [
    ("VIEW", "CREATE VIEW {n} AS SELECT 1 AS a", "DROP TABLE {n}"),
    ("TABLE", "CREATE TABLE {n} (a int)", "DROP VIEW {n}"),
    ("MATERIALIZED VIEW", "CREATE MATERIALIZED VIEW {n} AS SELECT 1 AS a", "DROP VIEW {n}"),
    ("VIEW", "CREATE VIEW {n} AS SELECT 1 AS a", "DROP MATERIALIZED VIEW {n}"),
]


@pytest.mark.parametrize(("kind", "create", "drop"), CASES)
def test_the_wrong_drop_gives_postgres_hint_and_drops_nothing(
    tmp_path: Path, postgres_url: str, kind: str, create: str, drop: str
) -> None:
    name = f"wrong_kind_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute(create.format(n=name))
        try:
            with pytest.raises(psycopg.Error) as theirs:
                pg.execute(drop.format(n=name))
        finally:
            pg.execute(f"DROP {kind} {name}")
    with Environment.open(tmp_path / "data") as env:
        env.sql(create.format(n=name))
        with pytest.raises(SqlError) as ours:
            env.sql(drop.format(n=name))
        assert ours.value.sqlstate == theirs.value.sqlstate == "42809"
        assert ours.value.hint == theirs.value.diag.message_hint
        assert name in env.names()
