"""The PostgreSQL sink: upsert and changelog, exactly once with the progress row, clear errors."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from spate.frontier import Antichain
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import PostgresSinkConnection, PostgresSinkMode
from spate.repr.arrow import updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import BYTES, DATE, FLOAT64, INT64, TEXT, TIMESTAMP, numeric
from spate.storage.sinks.interval import SinkError, SinkFenced
from spate.storage.sinks.postgres import PostgresSink
from tests.storage.sinks._collection import DESC, at, interval, random_updates


@pytest.fixture
def pgconn(postgres_url: str, pg_name: str) -> Iterator[psycopg.Connection]:
    conn = psycopg.connect(postgres_url, autocommit=True)
    yield conn
    conn.execute(f"drop table if exists {pg_name}, {pg_name}_log")  # type: ignore[arg-type]
    conn.execute(
        "delete from spate_sink_progress where sink_id like %s",  # type: ignore[arg-type]
        (f"{pg_name}%",),
    )
    conn.close()


def upsert(url: str, table: str, key: tuple[str, ...]) -> PostgresSinkConnection:
    return PostgresSinkConnection(Secret(url), table, PostgresSinkMode.UPSERT, key)


def table_rows(conn: psycopg.Connection, name: str) -> Counter[tuple[object, ...]]:
    return Counter(conn.execute(f"select k, v from {name}").fetchall())  # type: ignore[arg-type]


def test_upsert_and_changelog_exactly_once_across_reopen(
    pgconn: psycopg.Connection, postgres_url: str, pg_name: str, seed: int
) -> None:
    rng = random.Random(seed)
    updates = random_updates(rng, 40)

    def open_sinks() -> tuple[PostgresSink, PostgresSink]:
        up = PostgresSink(
            PostgresSinkConnection(Secret(postgres_url), pg_name, PostgresSinkMode.UPSERT, ("k",)),
            DESC,
            sink=pg_name,
        )
        log = PostgresSink(
            PostgresSinkConnection(
                Secret(postgres_url), f"{pg_name}_log", PostgresSinkMode.CHANGELOG
            ),
            DESC,
            sink=f"{pg_name}_log",
        )
        up.prepare()
        log.prepare()
        return up, log

    up, log = open_sinks()
    lower = 0
    while lower < 40:
        upper = min(40, lower + rng.randint(1, 6))
        batch = interval(updates, lower, upper)
        for sink in (up, log):
            assert sink.write(batch, lower=Antichain.of(lower), upper=Antichain.of(upper))
        if rng.random() < 0.3:
            up.close()
            log.close()
            up, log = open_sinks()
            for sink in (up, log):  # a replay after a restart is skipped
                assert not sink.write(batch, lower=Antichain.of(lower), upper=Antichain.of(upper))
        assert up.upper == log.upper == Antichain.of(upper)
        assert table_rows(pgconn, pg_name) == at(updates, upper - 1)
        lower = upper
    logged = pgconn.execute(
        f"select k, v, _time, _diff from {pg_name}_log"  # type: ignore[arg-type]
    ).fetchall()
    assert Counter(((k, v), t, d) for k, v, t, d in logged) == Counter(updates)
    up.close()
    log.close()


def test_all_types_round_trip(pgconn: psycopg.Connection, postgres_url: str, pg_name: str) -> None:
    import datetime as dt
    from decimal import Decimal

    desc = RelationDesc.of(
        ("k", INT64, False),
        ("n", numeric(10, 3)),
        ("f", FLOAT64),
        ("b", BYTES),
        ("d", DATE),
        ("ts", TIMESTAMP),
        ("s", TEXT),
    )
    row = (
        1,
        Decimal("-1.250"),
        0.1,
        b"\x00\xff",
        dt.date(2001, 2, 3),
        dt.datetime(2001, 2, 3, 4, 5, 6, 7),
        'a,"b"\n',
    )
    nulls = (2, None, None, None, None, None, "")
    sink = PostgresSink(upsert(postgres_url, pg_name, ("k",)), desc, sink=pg_name)
    sink.prepare()
    batch = updates_to_table(desc, [(row, 0, 1), (nulls, 0, 1)])
    assert sink.write(batch, lower=Antichain.of(0), upper=Antichain.of(1))
    got = pgconn.execute(f"select k, n, f, b, d, ts, s from {pg_name} order by k").fetchall()  # type: ignore[arg-type]
    assert got == [row, nulls]
    sink.close()


def test_bad_writes_change_nothing(
    pgconn: psycopg.Connection, postgres_url: str, pg_name: str
) -> None:
    sink = PostgresSink(upsert(postgres_url, pg_name, ("k",)), DESC, sink=pg_name)
    sink.prepare()
    first = updates_to_table(DESC, [((1, "a"), 0, 1)])
    assert sink.write(first, lower=Antichain.of(0), upper=Antichain.of(2))
    dup = updates_to_table(DESC, [((1, "b"), 2, 1)])  # a second row for key 1
    with pytest.raises(SinkError, match=r"two rows for one key \('k',\)"):
        sink.write(dup, lower=Antichain.of(2), upper=Antichain.of(3))
    phantom = updates_to_table(DESC, [((7, "x"), 2, -1)])  # deletes a row the table lacks
    with pytest.raises(SinkError, match="no longer matches"):
        sink.write(phantom, lower=Antichain.of(2), upper=Antichain.of(3))
    double = updates_to_table(DESC, [((5, "x"), 2, 2)])
    with pytest.raises(SinkError, match="multiplicity"):
        sink.write(double, lower=Antichain.of(2), upper=Antichain.of(3))
    empty = updates_to_table(DESC, [])
    with pytest.raises(SinkFenced, match="does not start at the committed frontier"):
        sink.write(empty, lower=Antichain.of(1), upper=Antichain.of(3))
    late = updates_to_table(DESC, [((3, "c"), 3, 1)])
    with pytest.raises(SinkError, match="not within"):
        sink.write(late, lower=Antichain.of(2), upper=Antichain.of(3))
    assert table_rows(pgconn, pg_name) == Counter({(1, "a"): 1})
    assert sink.upper == Antichain.of(2)
    sink.close()
    with pytest.raises(SinkError, match="key columns"):
        PostgresSink(upsert(postgres_url, pg_name, ("nope",)), DESC, sink="x")
    with pytest.raises(SinkError, match="not a table name"):
        PostgresSink(upsert(postgres_url, "a.b.c", ("k",)), DESC, sink="x")
    other = RelationDesc.of(("k", INT64, False), ("w", INT64))
    mismatched = PostgresSink(upsert(postgres_url, pg_name, ("k",)), other, sink=pg_name)
    with pytest.raises(SinkError, match="exists with columns"):
        mismatched.prepare()
    mismatched.close()


def test_sinks_of_the_same_name_keep_separate_progress_under_separate_keys(
    pgconn: psycopg.Connection, postgres_url: str, pg_name: str
) -> None:
    """Two environments sharing a database both have a sink ``u3``: the progress row is keyed
    by ``progress_key`` (the replica uses ``<id>/<input shard>``), so neither sees the
    other's frontier."""
    updates = random_updates(random.Random(7), 10)
    first = PostgresSink(
        upsert(postgres_url, pg_name, ("k",)), DESC, sink="u3", progress_key=f"{pg_name}-a"
    )
    first.prepare()
    assert first.write(interval(updates, 0, 8), lower=Antichain.of(0), upper=Antichain.of(8))
    second = PostgresSink(
        upsert(postgres_url, f"{pg_name}_log", ("k",)),
        DESC,
        sink="u3",
        progress_key=f"{pg_name}-b",
    )
    second.prepare()
    assert second.upper == Antichain.of(0)  # not the first sink's {8}
    assert second.write(interval(updates, 0, 3), lower=Antichain.of(0), upper=Antichain.of(3))
    assert first.upper == Antichain.of(8) and second.upper == Antichain.of(3)
    first.close()
    second.close()
