"""The read plan: each read's route is chosen once (``plan_read``), shown by ``EXPLAIN``, and
every route answers as PostgreSQL does for the same query over the same rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from spate.environment import read_plan
from spate.environment.api import Environment
from spate.environment.read_plan import (
    Constant,
    FastPathLookup,
    FastPathScan,
    InProcess,
    Introspection,
    OneOffDataflow,
    PersistRead,
    plan_read,
)
from spate.plan.builder import col, lit

SCHEMA = [
    "CREATE TABLE rp_t (id bigint NOT NULL, g bigint, name text)",
    "CREATE TABLE rp_s (id bigint NOT NULL, label text)",
    "INSERT INTO rp_t VALUES "
    + ", ".join(f"({i}, {i % 4}, 'n{i}')" for i in range(40))
    + ", (40, NULL, NULL)",
    "INSERT INTO rp_s VALUES (0, 'zero'), (1, 'one'), (2, 'two'), (7, 'seven')",
]
SPATE_ONLY = [
    "CREATE MATERIALIZED VIEW rp_m AS SELECT id, g, name FROM rp_t",
    "CREATE INDEX rp_m_id ON rp_m (id)",
    "CREATE VIEW rp_v AS SELECT id, g FROM rp_t WHERE g = 1",
]

# (query, route kind in spate, the same query in PostgreSQL: rp_m and rp_v are rp_t there)
CASES: list[tuple[str, str]] = [
    ("SELECT 1 + 2 AS x, 'a' AS y", "constant"),
    ("SELECT * FROM rp_m WHERE id = 7", "fast path lookup"),
    ("SELECT name FROM rp_m WHERE id IN (3, 5, 99)", "fast path lookup"),
    ("SELECT * FROM rp_m WHERE id = 1.5", "fast path lookup"),
    ("SELECT * FROM rp_m", "fast path scan"),
    ("SELECT id, g * 2 FROM rp_m WHERE g > 1", "fast path scan"),
    ("SELECT * FROM rp_t WHERE id = 3", "persist read"),
    ("SELECT * FROM rp_t", "persist read"),
    ("SELECT id FROM rp_t WHERE name IS NULL OR g = 2", "persist read"),
    ("SELECT t.id, s.label FROM rp_t t JOIN rp_s s ON t.id = s.id", "in process"),
    ("SELECT g, count(*), sum(id) FROM rp_t GROUP BY g", "in process"),
    ("SELECT id FROM rp_t WHERE id IN (SELECT id FROM rp_s)", "in process"),
    ("SELECT count(*) FROM rp_t WHERE g > (SELECT avg(id) FROM rp_s)", "in process"),
    ("SELECT * FROM rp_v", "in process"),
]


def _pg_text(sql: str) -> str:
    return sql.replace("rp_m", "rp_t").replace("rp_v", "(SELECT id, g FROM rp_t WHERE g = 1) v")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("read_plan") / "data")
    try:
        e.create_cluster("c", replicas=1)
        e.sql("SET cluster = c")
        for stmt in SCHEMA + SPATE_ONLY:
            e.sql(stmt)
        e.wait_hydrated(timeout=600)  # the index answers (before, persist would)
        assert e.select("rp_m", timeout=600).num_rows == 41
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    schema = f"rp_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        try:
            for stmt in SCHEMA:
                conn.execute(stmt)
            yield conn
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _explain(env: Environment, sql: str) -> list[str]:
    return [str(r["Optimized Plan"]) for r in env.sql(f"EXPLAIN {sql}").to_pylist()]


def _normal(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    return v


def _rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(_normal(v) for v in r) for r in rows), key=repr)


@pytest.mark.parametrize(("sql", "kind"), CASES, ids=[c[0] for c in CASES])
def test_route_and_answer_match_postgres(
    env: Environment,
    pg: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
    sql: str,
    kind: str,
) -> None:
    lines = _explain(env, sql)
    shown = next(line for line in lines if line.startswith("Read plan:"))
    said = shown.replace("fast path: ", "fast path ").replace(" of index", "")
    assert said.startswith(f"Read plan: {kind}"), shown
    created: list[Any] = []
    compute = env.runtime.compute
    create = compute.create_dataflow
    monkeypatch.setattr(
        compute, "create_dataflow", lambda *a, **kw: (created.append(a), create(*a, **kw))[1]
    )
    got = env.sql(sql)
    assert created == [], f"{kind} built a dataflow"
    spate_rows = [tuple(r.values()) for r in got.to_pylist()]
    assert _rows(spate_rows) == _rows(pg.execute(_pg_text(sql)).fetchall())


def test_explain_names_the_index_of_a_fast_path_lookup(env: Environment) -> None:
    lines = _explain(env, "SELECT * FROM rp_m WHERE id = 7")
    assert any(
        "fast path: lookup of index rp_m_id on rp_m (cluster c), key values (7)" in line
        for line in lines
    ), lines
    assert any(
        "no row can match" in line for line in _explain(env, "SELECT * FROM rp_m WHERE id = 1.5")
    )


def test_one_function_chooses_each_route(env: Environment) -> None:
    rt = env.runtime
    t, m = env.get("rp_t"), env.get("rp_m")
    s = env.get("rp_s")
    lookup = plan_read(rt, m.filter(col("id").eq(lit(3))), "c")
    assert isinstance(lookup, FastPathLookup) and lookup.constraints == ((3,),)
    assert lookup.index.name == "rp_m_id"
    scan = plan_read(rt, m, "c")
    assert isinstance(scan, FastPathScan) and scan.plan is scan.base
    persist = plan_read(rt, t, "c")
    assert isinstance(persist, PersistRead) and persist.cluster == "c"
    assert persist.here_up_to == rt.settings.small_read_updates
    joined = t.join(s, on=["id"])
    small = plan_read(rt, joined, "c")
    assert isinstance(small, InProcess) and isinstance(small.otherwise, OneOffDataflow)
    assert isinstance(plan_read(rt, joined, "c", small_reads=False), OneOffDataflow)
    # asked for no small reads, a filter over a table is a dataflow too; a lookup is not
    filtered = t.filter(col("g").eq(lit(1)))
    assert isinstance(plan_read(rt, filtered, "c", small_reads=False), OneOffDataflow)
    assert isinstance(
        plan_read(rt, m.filter(col("id").eq(lit(3))), "c", small_reads=False), FastPathLookup
    )
    system = env.get("spate_catalog.replicas")
    assert isinstance(plan_read(rt, system, "c"), Introspection)
    assert read_plan.kind(plan_read(rt, system, None)) == "introspection"


def test_constant_read_is_a_constant_route(env: Environment) -> None:
    got = env.sql("SELECT 1 AS one")
    assert got.to_pylist() == [{"one": 1}]
    assert _explain(env, "SELECT 1")[-1] == "Read plan: constant (evaluated here, no dataflow)"
    route = plan_read(env.runtime, env.get("rp_t").filter(lit(False)), "c")
    assert not isinstance(route, Constant)  # it still reads rp_t
