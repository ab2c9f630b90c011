"""A MySQL source made in SQL (CREATE SECRET, CONNECTION TO MYSQL, SOURCE FROM MYSQL … FOR
TABLES (db.t AS name)) against a MariaDB of the test's own, with a replication user and
password; the storage replica is killed (SIGKILL) while transactions stream, and the subsources
end equal to MariaDB's tables. An incompatible ALTER then stops only that table's subsource."""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from tests._mariadb import MariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _rows(env: Environment, query: str) -> Counter[tuple[Any, ...]]:
    result = env.sql(query)
    assert isinstance(result, pa.Table)
    return Counter(tuple(r.values()) for r in result.to_pylist())


def test_sql_source_follows_mariadb_across_a_storage_replica_kill(
    mariadb: MariaDB, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    db = f"e{uuid.uuid4().hex[:8]}"
    conn: Any = mariadb.connect()
    user = f"u{uuid.uuid4().hex[:6]}"

    def run(sql: str, args: object = None) -> None:
        with conn.cursor() as cur:
            cur.execute(sql, args)

    run(f"create database {db}")
    run(f"create table {db}.orders (id int primary key, item varchar(20), qty int not null)")
    run(f"create table {db}.notes (id bigint primary key, body text, at datetime)")
    run(f"create user '{user}'@'%' identified by 'pa''ss w0rd'")
    run(f"grant select, replication slave, binlog monitor on *.* to '{user}'@'%'")
    run(f"insert into {db}.orders values (1, 'a', 2), (2, 'b', 3)")
    run(f"insert into {db}.notes values (1, 'n', '2024-05-06 07:08:09')")
    keys = [1, 2]

    def churn(n: int) -> None:
        for _ in range(n):
            op = rng.random()
            if op < 0.5 or len(keys) < 3:
                k = max(keys) + 1
                run(f"insert into {db}.orders values (%s, %s, %s)", (k, rng.choice("xyz"), k))
                keys.append(k)
            elif op < 0.8:
                run(f"update {db}.orders set qty = qty + 1 where id = %s", (rng.choice(keys),))
            else:
                k = rng.choice(keys)
                run(f"delete from {db}.orders where id = %s", (k,))
                keys.remove(k)

    try:
        with Environment.open(tmp_path / "data") as env:
            env.sql("CREATE SECRET mypass AS 'pa''ss w0rd'")
            env.sql(
                f"CREATE CONNECTION my TO MYSQL (HOST '{mariadb.host}', PORT {mariadb.port}, "
                f"USER '{user}', PASSWORD SECRET mypass)"
            )
            env.sql(
                f"CREATE SOURCE shop FROM MYSQL CONNECTION my "
                f"FOR TABLES ({db}.orders, {db}.notes AS shop_notes)"
            )
            assert _rows(env, "SELECT id, body, at FROM shop_notes") == Counter(
                {(1, "n", dt.datetime(2024, 5, 6, 7, 8, 9)): 1}
            )
            churn(100)
            pid = env.runtime.orchestrator.pid("storage-r0")
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            churn(100)
            with conn.cursor() as cur:
                cur.execute(f"select id, item, qty from {db}.orders")
                want = Counter(tuple(r) for r in cur.fetchall())
            deadline = time.monotonic() + 240
            got: Counter[tuple[Any, ...]] = Counter()
            while time.monotonic() < deadline:
                got = _rows(env, "SELECT id, item, qty FROM shop_orders")
                if got == want:
                    break
                time.sleep(0.5)
            assert got == want
            # An incompatible change upstream stops that table's subsource alone: the error,
            # naming the table, is a row of shop_errors; what shop_orders holds stays readable
            # and shop_notes goes on.
            assert _rows(env, "SELECT count(*) FROM shop_errors") == Counter({(0,): 1})
            run(f"alter table {db}.orders add column note text")
            run(f"insert into {db}.orders values (%s, 'z', 1, 'new')", (max(keys) + 1,))
            run(f"insert into {db}.notes values (2, 'after', null)")
            deadline = time.monotonic() + 120
            errors: Counter[tuple[Any, ...]] = Counter()
            notes: Counter[tuple[Any, ...]] = Counter()
            while time.monotonic() < deadline:
                errors = _rows(env, "SELECT table_name, error FROM shop_errors")
                notes = _rows(env, "SELECT id FROM shop_notes")
                if errors and notes == Counter({(1,): 1, (2,): 1}):
                    break
                time.sleep(0.5)
            ((table, error),) = errors
            assert table == f"{db}.orders"
            assert f"table {db}.orders changed upstream" in error and "note" in error
            assert notes == Counter({(1,): 1, (2,): 1})
            assert _rows(env, "SELECT id, item, qty FROM shop_orders") == want
            status = env.sql(
                "SELECT name, errors, status FROM spate_catalog.source_statistics "
                "WHERE name = 'shop'"
            )
            assert isinstance(status, pa.Table)
            assert status.to_pylist()[0]["status"] != "stalled"
    finally:
        run(f"drop database {db}")
        run(f"drop user '{user}'@'%'")
        conn.close()
