"""Window functions of one ordering with different frames, over duplicate rows, against
PostgreSQL: through spate's SQL planner, then the in-process evaluator and a maintained view on
Spark under insertions and deletions.

PostgreSQL sorts a partition once and evaluates every function of the same ordering at the
same position, each over its own frame; where identical rows sit at positions ``k`` and
``k + 1``, one output row holds every function's value at ``k`` and the other every function's
at ``k + 1``. The ORDER BY ends with every column, so that only identical rows tie and
PostgreSQL's answer is determined.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from spate.ids import GlobalId
from spate.plan.errors import PlanTypeError
from spate.plan.relation import Project, RelationExpr
from spate.plan.window import WindowFrame, range_between, rows_between
from spate.render.dataflow import Dataflow
from spate.render.input import ArrowInputs
from spate.repr.arrow import updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.sql import MemoryCatalog, parse, plan_statement
from spate.sql import statements as st
from spate.testing.plan_strategies import single_plan_dataflow
from spate.testing.reference import evaluate
from tests.render.oracle import canon, peeked

COLUMNS = ("p", "o", "x")
CASES = 40
VIEWS = 3
_BOUNDS = [None, -2, -1, 0, 1, 2]

# (SQL, whether it reads its frame)
_CALLS = [
    ("sum(x)", True),
    ("count(*)", True),
    ("count(x)", True),
    ("min(x)", True),
    ("max(x)", True),
    ("first_value(x)", True),
    ("last_value(x)", True),
    ("nth_value(x, 2)", True),
    ("string_agg(x::text, ',')", True),
    ("row_number()", False),
    ("lag(x)", False),
]

FIXED = (
    "SELECT p, o, x,"
    " sum(x) OVER (ORDER BY x DESC, p, o ROWS BETWEEN 1 FOLLOWING AND 1 FOLLOWING),"
    " row_number() OVER (ORDER BY x DESC, p, o),"
    " count(x) OVER (ORDER BY x DESC, p, o RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)"
    " FROM t"
)
FIXED_ROWS: list[Row] = [(0, 0, 2), (0, 0, 2), (0, 0, 1), (1, 0, 0)]
"""Over the two copies of ``(0, 0, 2)`` the sum (the next row's ``x``) falls from 2 to 1 while
``row_number`` rises: a second node whose tie-break read the sum would number the copy with 1
first, where PostgreSQL pairs 2 with 1 and 1 with 2."""


EMPTY = (
    "SELECT p, o, x,"
    " count(*) OVER (ORDER BY p, o, x ROWS BETWEEN 2 FOLLOWING AND 1 FOLLOWING),"
    " sum(x) OVER (ORDER BY p, o, x ROWS BETWEEN 1 PRECEDING AND 2 PRECEDING),"
    " first_value(x) OVER (ORDER BY p, o, x ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)"
    " FROM t"
)
"""Frames whose bounds pass each other: empty for every row (PostgreSQL accepts them, Spark's
window frames do not)."""


@dataclass
class Planned:
    tid: GlobalId
    desc: RelationDesc
    catalog: MemoryCatalog


def _table() -> Planned:
    catalog = MemoryCatalog()
    (parsed,) = parse("CREATE TABLE t (p int, o int, x int)")
    stmt = plan_statement(parsed, catalog)
    assert isinstance(stmt, st.CreateTable)
    obj = catalog.add("t", stmt.desc, "table")
    assert obj.id is not None and obj.desc is not None
    return Planned(obj.id, obj.desc, catalog)


def _plan(table: Planned, sql: str) -> RelationExpr:
    """The query's plan, its visible columns only."""
    (parsed,) = parse(sql)
    stmt = plan_statement(parsed, table.catalog)
    assert isinstance(stmt, st.Select)
    plan = stmt.plan
    if plan.desc.arity > stmt.width:
        plan = Project(plan, tuple(range(stmt.width)))
    return plan


def _value(rng: random.Random) -> int | None:
    return None if rng.random() < 0.15 else rng.randrange(3)


def _rows(rng: random.Random, n: int) -> list[Row]:
    """``n`` rows of a small domain, a third of them copies of earlier ones."""
    out: list[Row] = []
    for _ in range(n):
        if out and rng.random() < 0.35:
            out.append(rng.choice(out))
        else:
            out.append((_value(rng), _value(rng), _value(rng)))
    return out


def _frame(rng: random.Random) -> WindowFrame | None:
    """A frame (``None``: none written, PostgreSQL's default)."""
    kind = rng.randrange(3)
    if kind == 0:
        return None
    if kind == 1:
        return range_between(rng.choice([None, 0]), rng.choice([None, 0]))
    while True:
        try:
            return rows_between(rng.choice(_BOUNDS), rng.choice(_BOUNDS))
        except PlanTypeError:  # PostgreSQL refuses it too
            continue


def _query(rng: random.Random) -> str:
    """Two or three functions of one partitioning and ordering, each with its frame."""
    partition = rng.sample(["p", "o"], k=rng.randrange(0, 2))
    keys = []
    for c in rng.sample(COLUMNS, k=rng.randrange(0, 3)):
        keys.append(f"{c} {rng.choice(['ASC', 'DESC'])} NULLS {rng.choice(['FIRST', 'LAST'])}")
    keys += [f"{c} ASC NULLS LAST" for c in COLUMNS]  # only identical rows tie
    over = f"PARTITION BY {', '.join(partition)} " if partition else ""
    over += f"ORDER BY {', '.join(keys)}"
    calls = []
    for call, framed in rng.sample(_CALLS, k=rng.randrange(2, 4)):
        frame = _frame(rng) if framed else None
        calls.append(f"{call} OVER ({over}{'' if frame is None else ' ' + frame.sql()})")
    return f"SELECT p, o, x, {', '.join(calls)} FROM t"


def _postgres(conn: psycopg.Connection, table: str, rows: Sequence[Row], sql: str) -> Counter[Row]:
    conn.execute(f"TRUNCATE {table}")
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", rows)
    return Counter(tuple(r) for r in conn.execute(sql.replace(" FROM t", f" FROM {table}")))


def _scratch_table(conn: psycopg.Connection, seed: int) -> str:
    schema = f"window_frames_{seed}"
    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    conn.execute(f"CREATE SCHEMA {schema}")
    conn.execute(f"CREATE TABLE {schema}.t (p int, o int, x int)")
    return f"{schema}.t"


def test_functions_of_one_ordering_pair_values_of_one_position(
    postgres_url: str, seed: int
) -> None:
    """The in-process evaluator of the planned query equals PostgreSQL."""
    rng = random.Random(seed)
    table = _table()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        pg_table = _scratch_table(conn, seed)
        try:
            for case in range(CASES):
                sql = FIXED if case == 0 else _query(rng)
                rows = FIXED_ROWS if case == 0 else _rows(rng, rng.randrange(4, 16))
                got = evaluate(_plan(table, sql), {table.tid: Counter(rows)}, 0)
                want = _postgres(conn, pg_table, rows, sql)
                assert Counter(dict(got.items())) == want, f"{sql}\nrows={rows}"
        finally:
            conn.execute(f"DROP SCHEMA {pg_table.split('.')[0]} CASCADE")


def _stream(rng: random.Random, times: int) -> list[tuple[Row, int, int]]:
    """:data:`FIXED_ROWS` at time 0, then insertions at every time (duplicates among them) and
    deletions of present rows."""
    present: Counter[Row] = Counter(FIXED_ROWS)
    out: list[tuple[Row, int, int]] = [(r, 0, 1) for r in FIXED_ROWS]
    for t in range(times):
        for r in _rows(rng, rng.randrange(2, 7)):
            out.append((r, t, 1))
            present[r] += 1
        for r in rng.sample(sorted(present.elements(), key=repr), k=min(2, len(present))):
            if t > 0 and rng.random() < 0.5 and present[r] > 0:
                out.append((r, t, -1))
                present[r] -= 1
    return out


def _check_view(
    spark: SparkSession,
    scratch: Path,
    conn: psycopg.Connection,
    pg_table: str,
    table: Planned,
    sql: str,
    stream: list[tuple[Row, int, int]],
    uppers: Sequence[int],
) -> None:
    plan = _plan(table, sql)
    inputs = {table.tid: table.desc}
    dataflow = single_plan_dataflow(plan, inputs, as_of=0, subscribe_id=None)
    (index,) = dataflow.index_exports
    fed = ArrowInputs.of({table.tid: updates_to_table(table.desc, [])}, upper=0)
    # the as_of's updates are there before the dataflow starts
    fed.append(table.tid, updates_to_table(table.desc, [u for u in stream if u[1] < 1]), 1)
    df = Dataflow(dataflow, fed, spark=spark, scratch=scratch, name="window_frames")
    lo = 0
    try:
        for hi in uppers:
            step = [u for u in stream if max(lo, 1) <= u[1] < hi]
            fed.append(table.tid, updates_to_table(table.desc, step), hi)
            df.step()
            for t in range(lo, hi):
                contents: Counter[Row] = Counter()
                for r, time, d in stream:
                    if time <= t:
                        contents[r] += d
                rows = list(contents.elements())
                want = _postgres(conn, pg_table, rows, sql)
                got = canon(peeked(df.peek(index.id, timestamp=t)), index.desc)
                assert got == canon(want, index.desc), f"at {t}: {sql}\nrows={rows}"
            lo = hi
    finally:
        df.drop()


def test_maintained_view_pairs_values_of_one_position(
    spark: SparkSession, tmp_path: Path, postgres_url: str, seed: int
) -> None:
    """A view on Spark equals PostgreSQL at every time under random changes: the fixed query
    and the empty frames' and random ones."""
    rng = random.Random(seed)
    table = _table()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        pg_table = _scratch_table(conn, seed)
        try:
            for i, sql in enumerate((FIXED, EMPTY, *(_query(rng) for _ in range(VIEWS)))):
                stream = _stream(rng, 6)
                uppers = [2, 4, 6]
                _check_view(spark, tmp_path / f"v{i}", conn, pg_table, table, sql, stream, uppers)
        finally:
            conn.execute(f"DROP SCHEMA {pg_table.split('.')[0]} CASCADE")


@pytest.mark.parametrize("sql", [FIXED])
def test_one_window_node_for_one_ordering(sql: str) -> None:
    """The functions of one partitioning and ordering share one Window node, whatever their
    frames."""
    from spate.plan.window import Window

    plan = _plan(_table(), sql)
    windows = [n for n in plan.walk() if isinstance(n, Window)]
    assert len(windows) == 1
    assert [f.sql() for f in windows[0].frames] == [
        "ROWS BETWEEN 1 FOLLOWING AND 1 FOLLOWING",
        "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",  # row_number's: no frame read
        "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
    ]
