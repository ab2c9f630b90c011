"""Real clients against a real Environment: psql, psycopg, SQLAlchemy, asyncpg.

Every answer is checked against the same read through Python (``Environment.select``). One
environment (one cluster with one replica) serves the whole module.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from spate.config import with_overrides
from spate.environment.api import Environment
from spate.environment.builtins import BUILTINS
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, BYTES, DATE, FLOAT64, INT64, JSONB, TEXT, TIMESTAMP, numeric

pytestmark = [pytest.mark.integration]

N = 200
PSQL = shutil.which("psql")
STDBUF = ["stdbuf", "-o0"] if shutil.which("stdbuf") else []


def _row(i: int) -> tuple[Any, ...]:
    return (
        i,
        None if i % 7 == 3 else f"item {i}",
        Decimal(i * 100 + 5).scaleb(-2),
        i / 4,
        i % 2 == 0,
        dt.date(2024, 1, 1) + dt.timedelta(days=i),
        dt.datetime(2024, 5, 6, 7, 8, 9, 250000) + dt.timedelta(minutes=i),
        json.dumps({"i": i}),
        bytes([i % 256, 1]),
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("pgwire") / "data")
    try:
        e.create_cluster("c", replicas=["r1"])
        desc = RelationDesc.of(
            ("id", INT64, False), ("name", TEXT), ("price", numeric(10, 2)), ("qty", FLOAT64),
            ("ok", BOOL), ("day", DATE), ("ts", TIMESTAMP), ("doc", JSONB), ("raw", BYTES),
        )  # fmt: skip
        e.create_table("items", desc)
        e.insert("items", [_row(i) for i in range(N)])
        e.create_materialized_view("items_mv", e.get("items"), cluster="c")
        e.create_index("items_by_id", on="items_mv", key=["id"], cluster="c")
        e.sql("SET cluster = c")  # type: ignore[attr-defined]
        assert e.select("items_mv", timeout=280).num_rows == N  # hydrated
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def server(env: Environment) -> Iterator[ServerThread]:
    s = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def dsn(server: ServerThread) -> str:
    return f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"


def _python_rows(env: Environment, name: str) -> list[tuple[Any, ...]]:
    table = env.select(name)
    return sorted(tuple(r.values()) for r in table.to_pylist())


def _normal(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """psycopg reads jsonb as Python objects; spate keeps it as text."""
    return tuple(json.dumps(v) if isinstance(v, dict) else v for v in row)


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_parameters_on_an_indexed_view(env: Environment, dsn: str, binary: bool) -> None:
    expected = {r[0]: r for r in _python_rows(env, "items_mv")}
    with psycopg.connect(dsn, autocommit=True) as c:
        for i in (3, N - 1):  # each a one-time dataflow (a filter is not an index lookup yet)
            got = c.execute(
                "SELECT * FROM items_mv WHERE id = %s", (i,), binary=binary, prepare=True
            ).fetchall()
            assert [_normal(r) for r in got] == [expected[i]]


def test_psycopg_server_side_cursor(env: Environment, dsn: str) -> None:
    with psycopg.connect(dsn) as c, c.cursor(name="all_items") as cur:
        cur.itersize = 33
        cur.execute("SELECT * FROM items")
        got = sorted(_normal(r) for r in cur)
    assert got == _python_rows(env, "items")


def test_psycopg_subscribe_cursor_sees_snapshot_then_changes(env: Environment, dsn: str) -> None:
    env.sql("CREATE TABLE sub_t (a bigint NOT NULL, b text)")  # type: ignore[attr-defined]
    env.insert("sub_t", [(1, "one"), (2, "two")])
    with psycopg.connect(dsn) as c:
        c.execute("DECLARE s CURSOR FOR SUBSCRIBE sub_t")
        seen: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            seen += c.execute("FETCH ALL s WITH (timeout = '5s')").fetchall()
        assert sorted((a, b, diff) for _, diff, a, b in seen) == [(1, "one", 1), (2, "two", 1)]
        env.insert("sub_t", [(3, "three")])
        more: list[tuple[Any, ...]] = []
        while not more and time.monotonic() < deadline:
            more = c.execute("FETCH ALL s WITH (timeout = '5s')").fetchall()
        assert [(a, b, diff) for _, diff, a, b in more] == [(3, "three", 1)]
        assert int(more[0][0]) >= int(seen[0][0])  # mz_timestamp
        c.rollback()


def test_sqlalchemy_reflects_and_queries(env: Environment, server: ServerThread) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(
        f"postgresql+psycopg://tester@127.0.0.1:{server.port}/spate?sslmode=disable"
    )
    try:
        insp = sa.inspect(engine)
        assert "items" in insp.get_table_names()
        assert "items_mv" in insp.get_materialized_view_names()
        # spate's introspection relations are in the catalog too, under their own schema.
        system = sorted(b.name.split(".", 1)[1] for b in BUILTINS)
        assert sorted(insp.get_table_names(schema="spate_catalog")) == system
        assert "replicas" not in insp.get_table_names()
        frontiers = [c["name"] for c in insp.get_columns("frontiers", schema="spate_catalog")]
        assert frontiers == env.select("spate_catalog.frontiers").column_names
        cols = {c["name"]: c for c in insp.get_columns("items")}
        assert list(cols) == ["id", "name", "price", "qty", "ok", "day", "ts", "doc", "raw"]
        assert isinstance(cols["price"]["type"], sa.Numeric) and cols["price"]["type"].scale == 2
        items = sa.Table("items", sa.MetaData(), autoload_with=engine)
        with engine.connect() as conn:
            got = conn.execute(sa.select(items).where(items.c.id == 12)).all()
        assert [_normal(tuple(r)) for r in got] == [
            r for r in _python_rows(env, "items") if r[0] == 12
        ]
    finally:
        engine.dispose()


def test_asyncpg_binary_results(env: Environment, server: ServerThread) -> None:
    import asyncpg

    expected = {r[0]: r for r in _python_rows(env, "items_mv")}

    async def run() -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(
            f"postgresql://tester@127.0.0.1:{server.port}/spate?sslmode=disable"
        )
        try:
            out = []
            for i in (1, 3, 150):
                out += [
                    tuple(r) for r in await conn.fetch("SELECT * FROM items_mv WHERE id = $1", i)
                ]
            return out
        finally:
            await conn.close()

    got = asyncio.run(run())
    assert got == [expected[1], expected[3], expected[150]]


@pytest.mark.skipif(PSQL is None, reason="the psql binary is not installed")
def test_psql_ddl_query_describe_and_copy_subscribe(env: Environment, server: ServerThread) -> None:
    assert PSQL is not None
    base = [PSQL, "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester", "-d", "spate"]
    run_env = dict(os.environ, PGSSLMODE="disable")

    def psql(cmd: str) -> str:
        out = subprocess.run(
            [*base, "-c", cmd],
            capture_output=True,
            text=True,
            timeout=120,
            env=run_env,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    psql("CREATE TABLE from_psql (a bigint NOT NULL, b text)")
    assert "INSERT 0 2" in psql("INSERT INTO from_psql VALUES (1, 'x'), (2, NULL)")
    out = psql("SELECT * FROM from_psql ORDER BY a")
    assert "1 | x" in out and "(2 rows)" in out
    assert _python_rows(env, "from_psql") == [(1, "x"), (2, None)]
    listing = psql(r"\dt")
    assert "from_psql" in listing and "items" in listing
    desc = psql(r"\d items")
    assert "numeric(10,2)" in desc and "timestamp without time zone" in desc
    assert '"items_by_id" btree (id)' in psql(r"\d items_mv")  # as PostgreSQL lists an index
    proc = subprocess.Popen(
        [*STDBUF, *base, "-c", "COPY (SUBSCRIBE from_psql) TO STDOUT"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=run_env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert sorted(line.split(b"\t", 1)[1] for line in lines) == [b"1\t1\tx\n", b"1\t2\t\\N\n"]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _transient_collections(env: Environment) -> list[str]:
    rt = env.runtime
    return [str(i) for i in rt.compute.collection_ids(rt.instance_of("c")) if i.kind == "t"]


def _subscribes_in_flight(dsn: str) -> list[tuple[Any, ...]]:
    """What ``spate_catalog.subscribes`` says is running, read over pgwire."""
    with psycopg.connect(dsn, autocommit=True) as c:
        return c.execute("SELECT id, name, cluster FROM spate_catalog.subscribes").fetchall()


def _until_none_in_flight(dsn: str, timeout: float = 60) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + timeout
    while (running := _subscribes_in_flight(dsn)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return running


def test_disconnect_mid_subscribe_leaves_no_subscribe(env: Environment, dsn: str) -> None:
    assert _until_none_in_flight(dsn) == []  # earlier tests' clients are gone too
    c = psycopg.connect(dsn)
    c.execute("DECLARE s CURSOR FOR SUBSCRIBE items_mv")
    assert c.execute("FETCH 1 s").fetchall()
    assert _transient_collections(env)  # the subscribe's dataflow runs
    running = _subscribes_in_flight(dsn)
    assert [(name, cluster) for _id, name, cluster in running] == [("items_mv", "c")]
    assert running[0][0] in _transient_collections(env)
    c.pgconn.finish()  # the client goes away mid-subscribe
    assert _until_none_in_flight(dsn) == []
    assert _transient_collections(env) == []


def test_psycopg_stream_of_subscribe_ends_it_when_left(env: Environment, dsn: str) -> None:
    expected = {r[0] for r in _python_rows(env, "items_mv")}
    seen = set()
    with psycopg.connect(dsn, autocommit=True) as c:
        for _, diff, *row in c.cursor().stream("SUBSCRIBE items_mv"):
            assert diff == 1
            seen.add(row[0])
            if len(seen) == 10:
                break  # psycopg cancels the statement and drains
        assert seen <= expected
        assert c.execute("SELECT 1").fetchone() == (1,)
    deadline = time.monotonic() + 60
    while _transient_collections(env) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _transient_collections(env) == []


def test_fifty_sessions_of_short_queries(env: Environment, dsn: str) -> None:
    """50 sessions x 100 reads of the indexed view (each a peek of the index, no Spark job)."""
    env.create_table("small", RelationDesc.of(("k", INT64, False), ("v", TEXT)))
    env.insert("small", [(i, f"v{i}") for i in range(10)])
    env.create_materialized_view("small_mv", env.get("small"), cluster="c")
    env.create_index("small_by_k", on="small_mv", key=["k"], cluster="c")
    expected = _python_rows(env, "small_mv")
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                # Serializable reads answer at once from the index; strict serializable ones
                # wait for the next tick of the read timestamp.
                c.execute("SET transaction_isolation = 'serializable'")
                mine = []
                for _ in range(100):
                    started = time.perf_counter()
                    got = c.execute("SELECT * FROM small_mv").fetchall()
                    mine.append(time.perf_counter() - started)
                    assert sorted(got) == expected
            with lock:
                latencies.extend(mine)
        except BaseException as e:
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(50)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    elapsed = time.perf_counter() - started
    assert not errors, errors[:3]
    assert len(latencies) == 5000
    q = statistics.quantiles(latencies, n=100)
    print(
        f"50 sessions x 100 queries: {5000 / elapsed:.0f} q/s, "
        f"p50 {q[49] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms"
    )


def test_psycopg_recursion_limit_bounds_with_recursive_in_its_session(dsn: str) -> None:
    count = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) "
    count += "SELECT count(*) FROM r CROSS JOIN (SELECT count(*) FROM items) AS i"
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SHOW recursion_limit").fetchall() == [("10000",)]
        c.execute("SET recursion_limit = 3")
        assert c.execute("SHOW recursion_limit").fetchall() == [("3",)]
        with pytest.raises(psycopg.errors.StatementTooComplex, match="after 3 iterations"):
            c.execute(count)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="positive integer"):
            c.execute("SET recursion_limit = 0")
        c.execute("RESET recursion_limit")
        assert c.execute(count).fetchall() == [(10,)]


def test_psycopg_real_time_recency_is_a_session_variable_the_engine_checks(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SHOW real_time_recency").fetchall() == [("off",)]
        c.execute("SET real_time_recency = on")
        assert c.execute("SHOW real_time_recency").fetchall() == [("on",)]
        assert c.execute("SELECT count(*) FROM items").fetchall() == [(N,)]  # no source: no wait
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="requires a Boolean"):
            c.execute("SET real_time_recency = 'maybe'")
        assert c.execute("SHOW real_time_recency").fetchall() == [("on",)]


def test_deep_statements_answer_or_are_54001_never_internal_errors(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SELECT " + "(" * 5000 + "1" + ")" * 5000).fetchone() == (1,)
        for sql in (
            "SELECT 1 WHERE 1 IN (" + ", ".join(map(str, range(600))) + ")",
            "SELECT " + " + ".join(map(str, range(2000))),
            "SELECT " + "(" * 5001 + "1" + ")" * 5001,
        ):
            # an answer or 54001; an internal error (XX000) would be another class
            with contextlib.suppress(psycopg.errors.StatementTooComplex):
                c.execute(sql).fetchall()
        assert c.execute("SELECT 2").fetchone() == (2,)


def test_evaluation_errors_on_the_replica_reach_the_client_with_their_sqlstate(
    env: Environment, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-off read and a subscribe evaluated by the replica (no small read here) fail with
    the code the replica raised, carried in its answer: PostgreSQL's for the same query."""
    rt = env.runtime
    monkeypatch.setattr(rt, "settings", with_overrides(rt.settings, small_read_updates=0))
    built: list[object] = []
    create = rt.compute.create_dataflow

    def recording(instance: Any, dataflow: Any, *args: Any, **kwargs: Any) -> None:
        built.append(dataflow)
        create(instance, dataflow, *args, **kwargs)

    monkeypatch.setattr(rt.compute, "create_dataflow", recording)
    env.sql("CREATE TABLE codes (a bigint, b bigint, s text)")  # type: ignore[attr-defined]
    try:
        env.insert("codes", [(1, 0, "x"), (2, 1, "2")])
        with psycopg.connect(dsn, autocommit=True) as c:
            with pytest.raises(psycopg.errors.DivisionByZero) as division:
                c.execute("SELECT sum(a / b) FROM codes")
            assert division.value.diag.message_primary == "division by zero"
            with pytest.raises(psycopg.errors.InvalidTextRepresentation) as cast:
                c.execute("SELECT max(s::int) FROM codes")
            assert cast.value.diag.sqlstate == "22P02"
            assert (cast.value.diag.message_primary or "").startswith(
                "invalid input syntax for type integer"
            )
            assert len(built) == 2  # both evaluated on the replica
        with psycopg.connect(dsn) as c:
            c.execute("DECLARE s CURSOR FOR SUBSCRIBE (SELECT a / b AS q FROM codes)")
            failed: BaseException | None = None
            for _ in range(12):
                try:
                    c.execute("FETCH ALL s WITH (timeout = '5s')").fetchall()
                except psycopg.Error as e:
                    failed = e
                    break
            assert isinstance(failed, psycopg.errors.DivisionByZero), failed
            assert failed.diag.message_primary == "division by zero"
            assert len(built) == 3
    finally:
        env.sql("DROP TABLE codes")  # type: ignore[attr-defined]
