"""Reads of a PostgreSQL source through the public API: what the source finds when it is
created is visible to the first read after ``create_source`` returns; with real-time recency a
read sees everything upstream had committed when it began."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.errors import ReadTimeout
from spate.plan.builder import col
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import PostgresSource

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture
def upstream(
    pg_logical_url: str, pg_name: str, pg_cleanup: list[str]
) -> Iterator[psycopg.Connection]:
    pg_cleanup.extend(
        [
            f"select pg_drop_replication_slot(slot_name) from pg_replication_slots "
            f"where slot_name = '{pg_name}'",
            f"drop publication if exists {pg_name}",
            f"drop table if exists {pg_name}",
            f"drop table if exists {pg_name}_other",
        ]
    )
    conn = psycopg.connect(pg_logical_url, autocommit=True)
    conn.execute(f"create table {pg_name} (id bigint primary key, v text)")  # type: ignore[arg-type]
    conn.execute(f"alter table {pg_name} replica identity full")  # type: ignore[arg-type]
    conn.execute(f"insert into {pg_name} select g, 'r' || g from generate_series(1, 50) g")  # type: ignore[arg-type]
    conn.execute(f"create publication {pg_name} for table {pg_name}")  # type: ignore[arg-type]
    conn.execute(f"create table {pg_name}_other (id bigint primary key)")  # type: ignore[arg-type]
    yield conn
    conn.close()


def test_existing_rows_are_in_the_first_read_through_a_view_and_index(
    upstream: psycopg.Connection, pg_logical_url: str, pg_name: str, tmp_path: Path
) -> None:
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=1)
        env.create_source("pg", PostgresSource(Secret(pg_logical_url), pg_name, pg_name))
        sub = f"pg_{pg_name}"
        env.create_view("v", env.get(sub))
        env.create_index("v_idx", on="v", key=["id"], cluster="c")
        begin = time.monotonic()
        rows = env.select("v", timeout=60)
        took = time.monotonic() - begin
        print(f"first read took {took:.1f} s")
        assert sorted(r["id"] for r in rows.to_pylist()) == list(range(1, 51)), f"{took:.1f} s"


def test_existing_rows_are_readable_at_the_time_the_source_was_created(
    upstream: psycopg.Connection, pg_logical_url: str, pg_name: str, tmp_path: Path
) -> None:
    with Environment.open(tmp_path / "data") as env:
        env.create_source("pg", PostgresSource(Secret(pg_logical_url), pg_name, pg_name))
        created = env.runtime.oracle.read_ts()  # no read from now on is at an earlier time
        env.set_retain_history(f"pg_{pg_name}", 600_000)  # keep that time readable
        at_creation = env.select(f"pg_{pg_name}", as_of=created, timeout=60)
        assert sorted(r["id"] for r in at_creation.to_pylist()) == list(range(1, 51))


def test_a_materialized_view_read_right_after_the_source_sees_its_snapshot(
    upstream: psycopg.Connection, pg_logical_url: str, pg_name: str, tmp_path: Path
) -> None:
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=1)
        env.create_source("pg", PostgresSource(Secret(pg_logical_url), pg_name, pg_name))
        env.create_materialized_view("mv", env.get(f"pg_{pg_name}").filter(col("id") > 10))
        view = env.select("mv", timeout=120)
        assert sorted(r["id"] for r in view.to_pylist()) == list(range(11, 51))


def _ids(table: pa.Table) -> list[int]:
    return sorted(r["id"] for r in table.to_pylist())


def test_a_real_time_recency_read_sees_what_upstream_committed_before_it(
    upstream: psycopg.Connection, pg_logical_url: str, pg_name: str, tmp_path: Path
) -> None:
    with Environment.open(tmp_path / "data") as env:
        env.create_source("pg", PostgresSource(Secret(pg_logical_url), pg_name, pg_name))
        sub = f"pg_{pg_name}"
        assert _ids(env.select(sub, timeout=60)) == list(range(1, 51))
        upstream.execute(f"insert into {pg_name} select g, 'n' from generate_series(51, 60) g")  # type: ignore[arg-type]
        # WAL the source has nothing to ingest from, after the rows it must see: the read
        # waits for the rows, not for changes that will never come.
        upstream.execute(f"insert into {pg_name}_other select generate_series(1, 100)")  # type: ignore[arg-type]
        assert _ids(env.select(sub, real_time_recency=True, timeout=60)) == list(range(1, 61))
        session = env.sql_session()
        session.sql("SET real_time_recency = true")
        assert session.sql("SHOW real_time_recency").to_pylist() == [  # type: ignore[union-attr]
            {"real_time_recency": "on"}
        ]
        upstream.execute(f"insert into {pg_name} values (61, 'sql')")  # type: ignore[arg-type]
        rows = session.sql(f"SELECT id FROM {sub}")
        assert isinstance(rows, pa.Table) and _ids(rows) == list(range(1, 62))


def test_a_real_time_recency_read_that_cannot_catch_up_names_the_source(
    upstream: psycopg.Connection, pg_logical_url: str, pg_name: str, tmp_path: Path
) -> None:
    with Environment.open(tmp_path / "data") as env:
        env.create_source("pg", PostgresSource(Secret(pg_logical_url), pg_name, pg_name))
        sub = f"pg_{pg_name}"
        env.select(sub, timeout=60)
        message = ""
        for attempt in range(5):  # the source could catch up within the timeout: rarely
            upstream.execute(f"insert into {pg_name} values ({100 + attempt}, 'x')")  # type: ignore[arg-type]
            try:
                env.select(sub, real_time_recency=True, timeout=0.05)
            except ReadTimeout as e:
                message = str(e)
                break
        assert "real-time recency: source pg " in message, "a 50 ms read never timed out"
