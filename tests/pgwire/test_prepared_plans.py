"""A prepared lookup keeps its plan between executions (spate.environment.prepared_plans,
spate.pgwire.prepared): planned once, the values put into the plan at each Execute, planned
again after any catalog change; results the same as PostgreSQL's."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import spate.environment.reads
import spate.environment.sql
import spate.pgwire.prepared
from spate.environment import prepared_plans as plans
from spate.environment import reads_at_once
from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.plan.evaluation.relation import evaluate
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT
from spate.sql import MemoryCatalog, parse, plan_statements
from spate.sql import statements as st
from tests.pgwire._calls import calls
from tests.pgwire._pg_scratch import pg_scratch

# -- the template, without a server ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "count", "keys"),
    [
        ("SELECT * FROM t WHERE id = $1", 1, True),
        ("SELECT v FROM t WHERE t.id = $1 AND v = $2 ORDER BY id LIMIT 5", 2, True),
        ("SELECT * FROM t WHERE $1 = id", 1, True),
        ("SELECT * FROM t WHERE v = 'x' AND id = $1;", 1, True),
        ("SELECT * FROM t WHERE id = $1 + 1", 1, False),  # computed from the value
        ("SELECT * FROM t WHERE id = $1 OR id = 2", 1, False),
        ("SELECT * FROM t WHERE (id = $1)", 1, False),
        ("SELECT * FROM t WHERE id = $1 AND $1 = 5", 1, False),  # twice
        ("SELECT * FROM t WHERE id = $1::int", 1, False),
        ("SELECT * FROM t WHERE NOT id = $1", 1, False),
        ("SELECT $1", 1, False),
        ("SELECT * FROM t WHERE id = $2", 2, False),  # $1 unused
        ("UPDATE t SET v = 'x' WHERE id = $1", 1, False),
        ("SELECT * FROM t", 0, False),
    ],
)
def test_which_statements_make_templates(sql: str, count: int, keys: bool) -> None:
    (parsed,) = parse(sql)
    assert plans.parameters_are_keys(parsed, count) is keys


def _catalog() -> MemoryCatalog:
    catalog = MemoryCatalog()
    catalog.add("t", RelationDesc.of(("id", INT64, False), ("v", TEXT)))
    return catalog


def _plan(sql: str) -> st.Select:
    (stmt,) = plan_statements(sql, _catalog())
    assert isinstance(stmt, st.Select)
    return stmt


def test_a_template_with_other_values_is_the_plan_of_their_text() -> None:
    catalog = object()
    first = _plan("SELECT v FROM t WHERE id = '5'::bigint AND v = 'a' ORDER BY v")
    template = plans.make_template(catalog, first, (5, "a"))
    assert isinstance(template, plans.LookupTemplate)
    text = "SELECT v FROM t WHERE id = '7'::bigint AND v = 'it''s' ORDER BY v"
    assert plans.instantiate(template, (7, "it's"), sql=text) == _plan(text)


@pytest.mark.parametrize(
    "values",
    [(None,), ("5",), (True,), (2**63,), (1.5,)],
    ids=["null", "text-for-int", "bool", "beyond-int64", "float"],
)
def test_values_that_do_not_fit_the_template_are_planned(values: tuple[object, ...]) -> None:
    template = plans.make_template(object(), _plan("SELECT * FROM t WHERE id = 5"), (5,))
    assert isinstance(template, plans.LookupTemplate)
    assert plans.instantiate(template, values, sql="") is None


def test_a_value_the_planner_changed_or_folded_makes_no_template() -> None:
    # the value is not in the plan as it came (converted from text: '5' became 5)
    assert isinstance(
        plans.make_template(object(), _plan("SELECT * FROM t WHERE id = '5'"), ("5",)),
        plans.NoTemplate,
    )
    # found twice: which one is the parameter's is not known
    twice = _plan("SELECT * FROM t WHERE id = 5 AND id = 5")
    assert isinstance(plans.make_template(object(), twice, (5,)), plans.NoTemplate)
    # not a chain over one relation
    joined = _plan("SELECT * FROM t a, t b WHERE a.id = 5")
    assert isinstance(plans.make_template(object(), joined, (5,)), plans.NoTemplate)


# -- through the server ----------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Environment, str]]:
    env = Environment.open(tmp_path / "data")  # no cluster: tables are read here
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield env, f"host=127.0.0.1 port={server.port} user=t dbname=spate sslmode=disable"
    finally:
        server.close()
        env.close()


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[str]:
    """Every statement ``module`` plans (its ``plan_statement``), in order."""
    planned: list[str] = []
    real = module.plan_statement

    def counting(parsed: Any, *args: Any, **kwargs: Any) -> Any:
        planned.append(parsed.sql)
        return real(parsed, *args, **kwargs)

    monkeypatch.setattr(module, "plan_statement", counting)
    return planned


def test_a_prepared_lookup_is_planned_once_and_again_after_ddl(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, dsn = served
    planned = _counting(monkeypatch, spate.environment.sql)
    templated = _counting(monkeypatch, spate.pgwire.prepared)
    lookup = "SELECT id, v FROM t WHERE id = %s"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
        c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL)")
        planned.clear()
        for k, want in [(1, [(1, "a")]), (2, [(2, "b")]), (3, [(3, None)]), (9, [])] * 3:
            assert c.execute(lookup, (k,), prepare=True).fetchall() == want
        # the first execution is planned (and once more for its template); the rest not
        assert len(planned) == 1 and len(templated) == 1, (planned, templated)
        # NULL is another parameter type to psycopg: another prepared statement, whose NULL
        # makes no template (= NULL folds)
        assert c.execute(lookup, (None,), prepare=True).fetchall() == []
        assert c.execute(lookup, (None,), prepare=True).fetchall() == []
        assert len(planned) == 3 and len(templated) == 2, (planned, templated)

        # Another table named t, made by another session (psycopg deallocates its prepared
        # statements after its own DDL): PostgreSQL plans the prepared statement again and
        # reads the new one; a kept plan would read the old table, still there as t_old.
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("ALTER TABLE t RENAME TO t_old")
            other.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
            other.execute("INSERT INTO t VALUES (1, 'new')")
        assert c.execute(lookup, (1,), prepare=True).fetchall() == [(1, "new")]
        assert c.execute(lookup, (2,), prepare=True).fetchall() == []
        assert len(templated) == 3  # a new template, for the new catalog

        c.execute("DROP TABLE t_old")
        c.execute("DROP TABLE t")
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute(lookup, (1,), prepare=True)


def test_a_prepared_lookup_in_a_transaction_block_is_planned(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, dsn = served
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
        c.execute("INSERT INTO t VALUES (1, 'a')")
        lookup = "SELECT v FROM t WHERE id = %s"
        for _ in range(3):
            assert c.execute(lookup, (1,), prepare=True).fetchall() == [("a",)]
        planned = _counting(monkeypatch, spate.environment.sql)
        with c.transaction():
            assert c.execute(lookup, (1,), prepare=True).fetchall() == [("a",)]
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):  # 25006, a read block
                c.execute("INSERT INTO t VALUES (2, 'b')")
        # planned under the block's rules, as every statement of the block
        assert planned[0].startswith("SELECT v FROM t WHERE id = ") and len(planned) == 2


def test_a_kept_lookup_runs_on_the_environments_loop_and_a_timeout_cancels_it_there(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executes of a prepared lookup with a kept plan take no worker thread of the server
    (``execute_prepared`` is not called: the read is awaited from the session's loop), and the
    statement timeout cancels the read on the environment's loop."""
    env, dsn = served
    on_thread: list[object] = []
    real = EnvironmentEngine.execute_prepared

    def reads_ok() -> float:
        value = env._metrics.registry.get_sample_value("spate_peeks_total", {"outcome": "ok"})
        return value or 0.0

    def counting(self: EnvironmentEngine, bound: Any, ctx: Any) -> Any:
        on_thread.append(bound.values)
        return real(self, bound, ctx)

    monkeypatch.setattr(EnvironmentEngine, "execute_prepared", counting)
    lookup = "SELECT v FROM t WHERE id = %s"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
        c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        for k in (1, 2, 1, 2, 3):
            want = {1: [("a",)], 2: [("b",)], 3: []}[k]
            assert c.execute(lookup, (k,), prepare=True).fetchall() == want
        assert on_thread == [(1,)]  # the first plans (and makes the template); no other
        # Reads awaited from the session's loop are counted as reads too.
        before = reads_ok()
        assert c.execute(lookup, (2,), prepare=True).fetchall() == [("b",)]
        deadline = time.monotonic() + 5
        while reads_ok() < before + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reads_ok() == before + 1

        hung: list[asyncio.Task[Any]] = []

        async def hangs(*args: Any, **kwargs: Any) -> Any:
            task = asyncio.current_task()
            assert task is not None
            hung.append(task)
            await asyncio.sleep(3600)

        monkeypatch.setattr(spate.environment.reads, "select", hangs)
        # not in memory here: read on the environment's loop
        monkeypatch.setattr(reads_at_once, "read_at_once", lambda *args, **kwargs: None)
        c.execute("SET statement_timeout = 200")
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            c.execute(lookup, (1,), prepare=True)
        deadline = time.monotonic() + 10
        while not (hung and hung[0].done()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hung and hung[0].cancelled()  # the read itself was canceled
        monkeypatch.undo()
        c.execute("SET statement_timeout = 0")
        assert c.execute(lookup, (2,), prepare=True).fetchall() == [("b",)]


_ROWS = [(1, "a", "x"), (2, "b", None), (3, "it's", "y"), (4, "", "z"), (5, None, "w")]


def test_prepared_lookups_answer_as_postgresql_does(served: tuple[Environment, str]) -> None:
    env, dsn = served
    env.create_table("pt", RelationDesc.of(("id", INT64, False), ("k", TEXT), ("w", TEXT)))
    env.insert("pt", _ROWS)
    values = "(1, 'a', 'x'), (2, 'b', NULL), (3, 'it''s', 'y'), (4, '', 'z'), (5, NULL, 'w')"
    ddl = [
        "CREATE TABLE pt (id bigint NOT NULL, k text, w text)",
        f"INSERT INTO pt VALUES {values}",
    ]
    url = os.environ.get("SPATE_TEST_POSTGRES_URL", "")
    queries: list[tuple[str, tuple[object, ...]]] = (
        [("SELECT id, k, w FROM pt WHERE id = %s", (i,)) for i in (1, 3, 5, 6, -1, None)]
        + [
            ("SELECT id, w FROM pt WHERE k = %s ORDER BY id", (k,))
            for k in ("a", "it's", "", "nope")
        ]
        + [("SELECT w FROM pt WHERE id = %s AND k = %s", (i, k)) for i, k in ((1, "a"), (1, "b"))]
        + [("SELECT id FROM pt WHERE w = %s", ("x",)), ("SELECT id FROM pt WHERE k = %s", (None,))]
    )
    with pg_scratch(ddl, "prepared") as schema, psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"SET search_path = {schema}")
        with psycopg.connect(dsn, autocommit=True) as c:
            for _ in range(3):  # planned, then from the template
                for sql, args in queries:
                    got = c.execute(sql, args, prepare=True).fetchall()
                    want = pg.execute(sql, args, prepare=True).fetchall()
                    assert sorted(got, key=repr) == sorted(want, key=repr), (sql, args)


# -- statements without parameters, by their text -------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "stable"),
    [
        ("SELECT * FROM t, s WHERE t.a = s.b", True),
        ("SELECT x FROM t WHERE x IN (SELECT y FROM s)", True),
        ("SELECT count(*), sum(v) FROM t GROUP BY k", True),
        ("SELECT x FROM t WHERE EXISTS (SELECT 1 FROM s WHERE s.y = t.x)", True),
        ("SELECT now(), x FROM t", False),
        ("SELECT current_timestamp", False),
        ("SELECT x FROM t WHERE ts < 'now'::timestamp", False),
        ("SELECT random() FROM t", False),
        ("SELECT current_setting('application_name')", False),
        ("SELECT mz_now()", False),
        ("SELECT k FROM t WHERE k = $1", False),
        ("INSERT INTO t VALUES (1)", False),
    ],
)
def test_which_texts_keep_their_plans(sql: str, stable: bool) -> None:
    (parsed,) = parse(sql)
    assert plans.stable_text(parsed) is stable


def test_a_select_run_again_keeps_its_plan_until_the_catalog_changes(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, dsn = served
    planned = _counting(monkeypatch, spate.environment.sql)
    query = "SELECT t.v, u.w FROM t, u WHERE t.id = u.id ORDER BY t.v"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
        c.execute("CREATE TABLE u (id bigint NOT NULL, w text)")
        c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        c.execute("INSERT INTO u VALUES (1, 'x'), (2, 'y')")
        planned.clear()
        for _ in range(5):  # simple queries, then the extended protocol
            assert c.execute(query.encode()).fetchall() == [("a", "x"), ("b", "y")]
        for _ in range(3):
            assert c.execute(query).fetchall() == [("a", "x"), ("b", "y")]
        assert planned == [query, query]  # planned at its first two runs only
        with psycopg.connect(dsn, autocommit=True) as other:  # another session's DDL
            other.execute("ALTER TABLE u RENAME TO u_old")
            other.execute("CREATE TABLE u (id bigint NOT NULL, w text)")
            other.execute("INSERT INTO u VALUES (2, 'new')")
        assert c.execute(query).fetchall() == [("b", "new")]
        timed = "SELECT count(*) FROM t WHERE now() > '2000-01-01'"
        planned.clear()
        for _ in range(3):
            assert c.execute(timed).fetchall() == [(2,)]
        assert len(planned) == 3  # now(): planned every time


# -- kept lookups answered at once ----------------------------------------------------------------

_PROBED = [
    ("SELECT * FROM t WHERE id = 5", (5,)),
    ("SELECT v, id + 1 AS n FROM t WHERE id = 5 AND v <> 'x'", (5,)),
    ("SELECT upper(v) AS u, id FROM t WHERE v = 'a' AND id > 2", ("a",)),
    ("SELECT id FROM t WHERE v = 'a' AND id = 5", ("a", 5)),
]


@pytest.mark.parametrize(("sql", "first"), _PROBED)
def test_a_probe_keeps_the_rows_the_plan_of_the_values_text_keeps(
    sql: str, first: tuple[object, ...], seed: int
) -> None:
    """The oracle: for random contents and values, the probe (compiled once, the values its
    inputs) over the rows with the looked-up value gives what evaluating the instantiated
    plan over the whole contents gives."""
    rng = random.Random(seed)
    template = plans.make_template(object(), _plan(sql), first)
    assert isinstance(template, plans.LookupTemplate)
    probe = reads_at_once.make_probe(template)
    assert probe is not None
    base = probe.base
    for _ in range(200):
        contents: Counter[tuple[object, ...]] = Counter()
        for _ in range(rng.randrange(12)):
            row = (rng.randrange(8), rng.choice(["a", "b", "x", None]))
            contents[row] += rng.randrange(1, 3)
        values = tuple(
            rng.randrange(8) if isinstance(v, int) else rng.choice(["a", "b", "x"]) for v in first
        )
        stmt = plans.instantiate(template, values, sql="")
        assert stmt is not None
        want = evaluate(stmt.plan, {base.id: contents}, 0)  # type: ignore[dict-item]
        looked_up = values[probe.slot]
        rows = Counter({r: n for r, n in contents.items() if r[probe.column] == looked_up})
        got = Counter(dict(reads_at_once.run_probe(probe, rows, values, 0)))  # type: ignore[arg-type]
        assert got == want, (values, contents)


def _hops(monkeypatch: pytest.MonkeyPatch, env: Environment) -> list[tuple[Any, ...]]:
    """Every read a kept lookup started on the environment's loop."""
    return calls(monkeypatch, env, "start_read")


@pytest.mark.parametrize("isolation", ["serializable", "strict serializable"])
def test_kept_lookups_are_answered_at_once_and_see_every_acknowledged_write(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """A kept lookup whose rows are in memory, final at its timestamp, is answered on the
    session's loop (no read started on the environment's); after a write is acknowledged,
    the next strictly serializable lookup sees it, and a serializable one sees it once the
    table's upper has passed it."""
    env, dsn = served
    hops = _hops(monkeypatch, env)
    lookup = "SELECT v, id FROM t WHERE id = %s"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
        c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL)")
        c.execute(f"SET transaction_isolation = '{isolation}'")
        for k in (1, 2, 3):  # the first plans; the next read (and index) the contents
            c.execute(lookup, (k,), prepare=True).fetchall()
        hops.clear()
        lookups = 30
        for i in range(lookups):
            k = i % 4 + 1
            want = {1: [("a", 1)], 2: [("b", 2)], 3: [(None, 3)], 4: []}[k]
            assert c.execute(lookup, (k,), prepare=True).fetchall() == want
        print(f"{isolation}: {len(hops)} reads on the environment's loop for {lookups}")
        assert len(hops) <= lookups // 4  # a new state to read now and then, not per lookup
        for k in range(10, 15):
            c.execute(f"INSERT INTO t VALUES ({k}, 'w{k}')")
            deadline = time.monotonic() + (0 if isolation == "strict serializable" else 10)
            while True:
                got = c.execute(lookup, (k,), prepare=True).fetchall()
                if got or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            assert got == [(f"w{k}", k)]
        c.execute("DELETE FROM t WHERE id = 1")
        if isolation == "strict serializable":
            assert c.execute(lookup, (1,), prepare=True).fetchall() == []
        for v in ("c", "d"):  # a key looked up before, its row changed: the new row
            c.execute(f"UPDATE t SET v = '{v}' WHERE id = 2")
            deadline = time.monotonic() + (0 if isolation == "strict serializable" else 10)
            while True:
                got = c.execute(lookup, (2,), prepare=True).fetchall()
                if got == [(v, 2)] or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            assert got == [(v, 2)]


def test_a_lookup_answered_at_once_reads_the_table_the_catalog_names_now(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog change makes the kept route go with the kept plan: a table dropped and made
    again under the same name is the one read, from its own contents."""
    env, dsn = served
    lookup = "SELECT v FROM t WHERE id = %s"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
        c.execute("INSERT INTO t VALUES (1, 'old')")
        for _ in range(4):
            assert c.execute(lookup, (1,), prepare=True).fetchall() == [("old",)]
        hops = _hops(monkeypatch, env)
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("DROP TABLE t")
            other.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
            other.execute("INSERT INTO t VALUES (1, 'new'), (2, 'two')")
        for _ in range(4):
            assert c.execute(lookup, (1,), prepare=True).fetchall() == [("new",)]
            assert c.execute(lookup, (2,), prepare=True).fetchall() == [("two",)]
        assert len(hops) <= 2  # the new table's contents read once, then answered at once


def test_concurrent_sessions_answered_at_once_see_acknowledged_writes(
    served: tuple[Environment, str], seed: int
) -> None:
    """Sessions looking up keys strictly serializably while another writes them: a key the
    writer had acknowledged before a lookup began is always seen."""
    _, dsn = served
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text)")
        c.execute("INSERT INTO t VALUES (0, 'v0')")
    acknowledged = [0]  # keys written and acknowledged, in order
    errors: list[BaseException] = []
    done = threading.Event()

    def reader(i: int) -> None:
        rng = random.Random(seed + i)
        try:
            with psycopg.connect(dsn, autocommit=True) as r:
                while not done.is_set():
                    k = rng.choice(acknowledged)  # acknowledged before this lookup began
                    got = r.execute("SELECT v FROM t WHERE id = %s", (k,), prepare=True)
                    assert got.fetchall() == [(f"v{k}",)], k
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        with psycopg.connect(dsn, autocommit=True) as w:
            for k in range(1, 15):
                w.execute(f"INSERT INTO t VALUES ({k}, 'v{k}')")
                acknowledged.append(k)
                time.sleep(0.02)
    finally:
        done.set()
        for t in threads:
            t.join(60)
    assert not errors, errors[0]
