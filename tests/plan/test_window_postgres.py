"""The reference evaluator's window functions against PostgreSQL on random tables.

Each case draws a table (duplicates, NULLs, small domains so that partitions and peers are
large), a PARTITION BY and an ORDER BY, and compares every function with PostgreSQL's answer.
PostgreSQL orders peers arbitrarily, so row_number, lag and lead are asked of it with the
window's tie-break spelled out (the whole row ascending, NULLs last); rank, dense_rank and the
aggregates over the window's own ORDER BY (whose frame includes the peers).
"""

from __future__ import annotations

import random
from collections import Counter
from decimal import Decimal

import psycopg

from spate.ids import GlobalId
from spate.plan import (
    Get,
    avg,
    col,
    count,
    cume_dist,
    dense_rank,
    first_value,
    lag,
    last_value,
    lead,
    max_,
    min_,
    nth_value,
    ntile,
    percent_rank,
    range_between,
    rank,
    row_number,
    rows_between,
    string_agg,
)
from spate.plan import sum_ as sum_agg
from spate.plan.builder import SortKey
from spate.plan.errors import PlanTypeError
from spate.plan.window import WindowFrame
from spate.repr import INT64, TEXT, RelationDesc
from spate.testing.reference import evaluate

T_ID = GlobalId.user(9)
COLUMNS = ("p", "o", "x")
DESC = RelationDesc.of(*((c, INT64, True) for c in COLUMNS))
CASES = 40


def _value(rng: random.Random, domain: int) -> int | None:
    return None if rng.random() < 0.2 else rng.randrange(domain)


def _order_sql(keys: list[SortKey]) -> str:
    parts = []
    for k in keys:
        nulls_last = (not k.desc) if k.nulls_last is None else k.nulls_last
        parts.append(
            f"{k.column} {'DESC' if k.desc else 'ASC'} NULLS {'LAST' if nulls_last else 'FIRST'}"
        )
    return ", ".join(parts)


def test_reference_windows_match_postgresql(postgres_url: str, seed: int) -> None:
    rng = random.Random(seed)
    schema = f"window_ref_{seed}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            for case in range(CASES):
                _check_case(conn, f"{schema}.t{case}", rng)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _check_case(conn: psycopg.Connection, table: str, rng: random.Random) -> None:
    rows = [(_value(rng, 3), _value(rng, 4), _value(rng, 6)) for _ in range(rng.randrange(0, 14))]
    rows += rng.sample(rows, k=min(len(rows), rng.randrange(0, 3)))  # duplicates
    partition = rng.sample(["p", "o"], k=rng.randrange(0, 2))
    order = [
        SortKey(c, rng.random() < 0.5, rng.choice([None, True, False]))
        for c in rng.sample(COLUMNS, k=rng.randrange(0, 3))
    ]
    offset = rng.randrange(-2, 3)  # PostgreSQL takes negative offsets too
    nth, buckets = rng.randrange(1, 4), rng.randrange(1, 5)
    plan = Get(T_ID, DESC).window(
        partition,
        order_by=order,
        rn=row_number(),
        r=rank(),
        dr=dense_rank(),
        lg=lag(col("x")),
        ld=lead(col("x"), offset, -1),
        n=count(),
        nx=count(col("x")),
        s=sum_agg(col("x")),
        lo=min_(col("x")),
        hi=max_(col("x")),
        fv=first_value(col("x")),
        lv=last_value(col("x")),
        nv=nth_value(col("x"), nth),
        nt=ntile(buckets),
        pr=percent_rank(),
        cd=cume_dist(),
        a=avg(col("x")),
    )
    want = evaluate(plan, {T_ID: Counter(rows)}, 0)
    conn.execute(f"CREATE TABLE {table} (p int, o int, x int)")
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", rows)
    over = f"PARTITION BY {', '.join(partition)}" if partition else ""
    peers = f"{over} ORDER BY {_order_sql(order)}" if order else over
    tie = [SortKey(c) for c in COLUMNS]
    total = f"{over} ORDER BY {_order_sql([*order, *tie])}"
    # the frame's last row in the total order: the last of the row's peers by the whole row
    peer_set = ", ".join([*partition, *(k.column for k in order)])
    by_peers = f"{'PARTITION BY ' + peer_set if peer_set else ''} ORDER BY {_order_sql(tie)}"
    sql = (
        f"SELECT p, o, x, row_number() OVER t, rank() OVER w, dense_rank() OVER w,"
        f" lag(x) OVER t, lead(x, {offset}, -1) OVER t, count(*) OVER w, count(x) OVER w,"
        f" sum(x) OVER w, min(x) OVER w, max(x) OVER w, first_value(x) OVER t,"
        f" last_value(x) OVER (p ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING),"
        f" CASE WHEN count(*) OVER w >= {nth} THEN nth_value(x, {nth}) OVER"
        f" (t ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) END,"
        f" ntile({buckets}) OVER t, percent_rank() OVER w, cume_dist() OVER w, avg(x) OVER w"
        f" FROM {table} WINDOW w AS ({peers}), t AS ({total}), p AS ({by_peers})"
    )
    got: Counter[tuple[object, ...]] = Counter()
    for row in conn.execute(sql).fetchall():
        *head, average = row
        got[(*head, None if average is None else round(float(Decimal(average)), 9))] += 1
    rounded = Counter(
        {(*r[:-1], None if r[-1] is None else round(r[-1], 9)): m for r, m in want.items()}
    )
    assert got == rounded, f"{sql}\nrows={rows}"


_FRAME_BOUNDS = [None, -2, -1, 0, 1, 2]


def _draw_frame(rng: random.Random, rows: bool) -> WindowFrame:
    while True:
        if not rows:
            return range_between(rng.choice([None, 0]), rng.choice([None, 0]))
        try:
            return rows_between(rng.choice(_FRAME_BOUNDS), rng.choice(_FRAME_BOUNDS))
        except PlanTypeError:  # PostgreSQL refuses it too
            continue


def test_reference_frames_match_postgresql(postgres_url: str, seed: int) -> None:
    """ROWS frames over the total order (so that PostgreSQL's answer is determined) with every
    frame-reading function, and RANGE frames over the window's own ORDER BY with the aggregates
    that do not depend on the peers' order."""
    rng = random.Random(seed)
    schema = f"window_frame_{seed}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            for case in range(CASES):
                _check_frame_case(conn, f"{schema}.t{case}", rng)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _check_frame_case(conn: psycopg.Connection, table: str, rng: random.Random) -> None:
    rows = [(_value(rng, 3), _value(rng, 4), _value(rng, 6)) for _ in range(rng.randrange(0, 12))]
    rows += rng.sample(rows, k=min(len(rows), rng.randrange(0, 3)))
    partition = rng.sample(["p", "o"], k=rng.randrange(0, 2))
    order = [
        SortKey(c, rng.random() < 0.5, rng.choice([None, True, False]))
        for c in rng.sample(COLUMNS, k=rng.randrange(0, 3))
    ]
    by_rows = rng.random() < 0.6
    frame = _draw_frame(rng, by_rows)
    nth = rng.randrange(1, 3)
    x = col("x")
    funcs = {"n": count(), "nx": count(x), "s": sum_agg(x), "lo": min_(x), "hi": max_(x)}
    calls = ["count(*)", "count(x)", "sum(x)", "min(x)", "max(x)"]
    if by_rows:
        funcs |= {
            "fv": first_value(x),
            "lv": last_value(x),
            "nv": nth_value(x, nth),
            "sa": string_agg(x.cast(TEXT), ","),
        }
        calls += [
            "first_value(x)",
            "last_value(x)",
            f"nth_value(x, {nth})",
            "string_agg(x::text, ',')",
        ]
    plan = Get(T_ID, DESC).window(partition, order_by=order, frame=frame, **funcs)
    want = evaluate(plan, {T_ID: Counter(rows)}, 0)
    conn.execute(f"CREATE TABLE {table} (p int, o int, x int)")
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", rows)
    over = f"PARTITION BY {', '.join(partition)}" if partition else ""
    keys = [*order, *(SortKey(c) for c in COLUMNS)] if by_rows else order
    window = f"{over} ORDER BY {_order_sql(keys)}" if keys else over
    sql = (
        f"SELECT p, o, x, {', '.join(f'{c} OVER w' for c in calls)} FROM {table}"
        f" WINDOW w AS ({window} {frame.sql()})"
    )
    got = Counter(tuple(r) for r in conn.execute(sql).fetchall())
    assert got == Counter(dict(want.items())), f"{sql}\nrows={rows}"
