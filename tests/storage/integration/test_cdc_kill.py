"""PostgreSQL CDC through a real storage replica process, killed (-9) twice mid-stream.

Upstream: a snapshot of 200 rows, then 1,000 inserts, updates and deletes in small
transactions. The replica is killed twice while they stream. The export collection must equal
the upstream table at every time it binds (each bound state is a state the table had after
some transaction, in order), never hold a row twice, and end equal to the table.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from spate.protocol.secret import Secret
from spate.protocol.storage_desc import PostgresSource
from spate.repr.types import Row
from spate.storage.sources.postgres.catalog import describe_source
from tests.storage.integration._cdc_kill import ingest_through_two_kills

pytestmark = [pytest.mark.integration]


class Upstream:
    """The table as the test changes it, and its state after every transaction."""

    def __init__(self, url: str, name: str, rng: random.Random) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.name = name
        self.rng = rng
        self.rows: dict[int, Row] = {}
        self.states: list[Counter[Row]] = []
        self.done_ops = 0
        self.next_key = 0

    def row(self, key: int) -> Row:
        return (
            key,
            self.rng.choice(["a", "b", "c,d", 'q"t', ""]),
            Decimal(self.rng.randint(0, 99999)) / 100,
        )

    def insert(self, cur: psycopg.Cursor) -> None:  # type: ignore[type-arg]
        r = self.row(self.next_key)
        self.next_key += 1
        cur.execute(f"insert into {self.name} values (%s, %s, %s)", r)  # type: ignore[call-overload]
        self.rows[r[0]] = r  # type: ignore[index]

    def snapshot_rows(self, n: int) -> None:
        with self.conn.cursor() as cur:
            for _ in range(n):
                self.insert(cur)
        self.states.append(Counter(self.rows.values()))

    def run(self, n_ops: int) -> None:
        rng = self.rng
        while self.done_ops < n_ops:
            with self.conn.transaction(), self.conn.cursor() as cur:
                for _ in range(rng.randint(1, 4)):
                    op = rng.random()
                    if op < 0.4 or len(self.rows) < 10:
                        self.insert(cur)
                    elif op < 0.75:
                        k = rng.choice(list(self.rows))
                        new = self.row(k)
                        cur.execute(  # type: ignore[call-overload]
                            f"update {self.name} set v = %s, n = %s where id = %s",
                            (new[1], new[2], k),
                        )
                        self.rows[k] = new
                    else:
                        k = rng.choice(list(self.rows))
                        cur.execute(f"delete from {self.name} where id = %s", (k,))  # type: ignore[call-overload]
                        del self.rows[k]
                    self.done_ops += 1
            self.states.append(Counter(self.rows.values()))
            threading.Event().wait(rng.uniform(0.0, 0.02))


async def test_cdc_exactly_once_across_two_kill9(
    pg_logical_url: str, pg_name: str, pg_cleanup: list[str], tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    pg_cleanup.extend(
        [
            f"select pg_drop_replication_slot('{pg_name}') from pg_replication_slots "
            f"where slot_name = '{pg_name}'",
            f"drop publication if exists {pg_name}",
            f"drop table if exists {pg_name}",
        ]
    )
    up = Upstream(pg_logical_url, pg_name, rng)
    up.conn.execute(f"create table {pg_name} (id int primary key, v text, n numeric(10,2))")  # type: ignore[arg-type]
    up.conn.execute(f"alter table {pg_name} replica identity full")  # type: ignore[arg-type]
    up.snapshot_rows(200)
    up.conn.execute(f"create publication {pg_name} for table {pg_name}")  # type: ignore[arg-type]
    table = describe_source(pg_logical_url, publication=pg_name, slot=pg_name).tables[0]

    try:
        source = PostgresSource(Secret(pg_logical_url), pg_name, pg_name)
        await ingest_through_two_kills(tmp_path, source, table.output, table.desc, up, rng)
    finally:
        up.conn.close()
