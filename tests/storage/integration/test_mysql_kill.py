"""MySQL CDC from a MariaDB of the test's own through a real storage replica process, killed
(-9) twice while concurrent transactions stream.

Upstream: a snapshot of 200 rows, then 1,000 random inserts, updates (of values and of keys) and
deletes in small transactions (seeded; the seed is printed). The export collection must equal
the upstream table at every time it binds (each bound state is one the table had after some
transaction, in order), never hold a row twice, and end equal to the table as MariaDB itself
returns it (the oracle).
"""

from __future__ import annotations

import random
import threading
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spate.protocol.mysql import MySqlSource, mysql_connection_settings
from spate.repr.types import Row
from spate.storage.sources.mysql.catalog import describe_source, settings_of
from tests._mariadb import MariaDB
from tests.storage.integration._cdc_kill import ingest_through_two_kills

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


class Upstream:
    """The table as the test changes it, and its state after every transaction."""

    def __init__(self, db: MariaDB, table: str, rng: random.Random) -> None:
        self.conn: Any = db.connect()
        self.table = table
        self.rng = rng
        self.rows: dict[int, Row] = {}
        self.states: list[Counter[Row]] = []
        self.done_ops = 0
        self.next_key = 0

    def row(self, key: int) -> Row:
        return (
            key,
            self.rng.choice(["a", "b", "c,d", "q't", "", None]),
            Decimal(self.rng.randint(0, 99999)) / 100,
        )

    def insert(self, cur: Any) -> None:
        r = self.row(self.next_key)
        self.next_key += 1
        cur.execute(f"insert into {self.table} values (%s, %s, %s)", r)
        self.rows[int(r[0])] = r  # type: ignore[call-overload]

    def snapshot_rows(self, n: int) -> None:
        with self.conn.cursor() as cur:
            for _ in range(n):
                self.insert(cur)
        self.states.append(Counter(self.rows.values()))

    def run(self, n_ops: int) -> None:
        rng = self.rng
        while self.done_ops < n_ops:
            with self.conn.cursor() as cur:
                cur.execute("begin")
                for _ in range(rng.randint(1, 4)):
                    op = rng.random()
                    if op < 0.4 or len(self.rows) < 10:
                        self.insert(cur)
                    elif op < 0.7:
                        k = rng.choice(list(self.rows))
                        new = self.row(k)
                        cur.execute(
                            f"update {self.table} set v = %s, n = %s where id = %s",
                            (new[1], new[2], k),
                        )
                        self.rows[k] = new
                    elif op < 0.8:
                        k = rng.choice(list(self.rows))
                        new_key = self.next_key
                        self.next_key += 1
                        cur.execute(f"update {self.table} set id = %s where id = %s", (new_key, k))
                        self.rows[new_key] = (new_key, *self.rows.pop(k)[1:])
                    else:
                        k = rng.choice(list(self.rows))
                        cur.execute(f"delete from {self.table} where id = %s", (k,))
                        del self.rows[k]
                    self.done_ops += 1
                cur.execute("commit")
            self.states.append(Counter(self.rows.values()))
            threading.Event().wait(rng.uniform(0.0, 0.02))

    def oracle(self) -> Counter[Row]:
        """The table as MariaDB returns it."""
        with self.conn.cursor() as cur:
            cur.execute(f"select id, v, n from {self.table}")
            return Counter(tuple(r) for r in cur.fetchall())


async def test_mysql_cdc_exactly_once_across_two_kill9(
    mariadb: MariaDB, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)  # the seed fixture prints it
    database = f"k{uuid.uuid4().hex[:8]}"
    up = Upstream(mariadb, f"{database}.t", rng)
    with up.conn.cursor() as cur:
        cur.execute(f"create database {database}")
        cur.execute(f"create table {up.table} (id int primary key, v text, n decimal(10,2))")
    up.snapshot_rows(200)
    settings = mysql_connection_settings(mariadb.host, mariadb.port, mariadb.user)
    (table,) = describe_source(settings_of(settings.reveal()), [up.table])

    try:
        source = MySqlSource(settings, server_id=901)
        await ingest_through_two_kills(
            tmp_path, source, table.output, table.desc, up, rng, final=up.oracle
        )
    finally:
        with up.conn.cursor() as cur:
            cur.execute(f"drop database {database}")
        up.conn.close()
