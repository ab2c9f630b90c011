"""The interval functions of the reference evaluator (spate.plan.evaluation.interval) and the
interval input syntax (spate.repr.interval_text) agree with PostgreSQL on random values:
``interval * float8``, ``interval / float8``, ``extract(epoch from interval)``, the canonical
representative (equal to the value, printed as ``justify_interval`` of a one-signed span) and
the text a quoted constant is read from. Checked against ``SPATE_TEST_POSTGRES_URL``."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from spate.errors import EvalError
from spate.plan.evaluation.interval import (
    epoch,
    justify_days,
    justify_hours,
    justify_interval,
    scale,
)
from spate.repr.interval import Interval, canonical
from spate.repr.interval_text import parse_interval


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    conn = psycopg.connect(postgres_url, autocommit=True)
    conn.execute("SET IntervalStyle TO 'postgres'")
    conn.adapters.register_loader("interval", TextLoader)
    yield conn
    conn.close()


def _random_interval(rng: random.Random) -> Interval:
    big = rng.random() < 0.1
    months = rng.randint(-(2**31), 2**31 - 1) if big else rng.randint(-30, 30)
    days = rng.randint(-(2**31), 2**31 - 1) if big else rng.randint(-60, 60)
    micros = rng.choice([0, rng.randint(-(10**12), 10**12), rng.randint(-(2**63), 2**63 - 1)])
    return Interval(months, days, micros)


def _pg_literal(iv: Interval) -> str:
    # months, days and microseconds exactly (make_interval's seconds are a double)
    return f"('{iv.months} mons {iv.days} days'::interval + '{iv.micros} microseconds')"


def _ours(fn: Any) -> str:
    try:
        out = fn()
    except EvalError as e:
        return f"error {e.sqlstate}"
    return out.text() if isinstance(out, Interval) else str(out)


def _theirs(pg: psycopg.Connection[Any], sql: str) -> str:
    try:
        return str(pg.execute(sql).fetchone()[0])  # type: ignore[index]
    except psycopg.Error as e:
        return f"error {e.sqlstate}"


FACTORS = [0.0, 1.0, -1.0, 1.5, 0.3, -2.25, 3.0, 1e-7, 7.0, 1e10, 0.1]


def test_multiplication_and_division_follow_postgres(
    pg: psycopg.Connection[Any], seed: int
) -> None:
    rng = random.Random(seed)
    problems = []
    for _ in range(300):
        iv = _random_interval(rng)
        if abs(iv.micros) > 2**62:  # PostgreSQL cannot spell the operand
            continue
        f = rng.choice([*FACTORS, rng.uniform(-100, 100)])
        for op, divide in (("*", False), ("/", True)):
            sql = f"SELECT {_pg_literal(iv)} {op} {f!r}::float8"
            theirs = _theirs(pg, sql)
            ours = _ours(lambda iv=iv, f=f, d=divide: scale(iv, f, d))
            if ours != theirs:
                problems.append(f"{sql}: ours {ours}, PostgreSQL {theirs}")
    assert not problems, "\n".join(problems[:10])


def test_epoch_and_canonical_values_follow_postgres(pg: psycopg.Connection[Any], seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        iv = _random_interval(rng)
        if abs(iv.micros) > 2**62:
            continue
        lit = _pg_literal(iv)
        assert str(epoch(iv)) == _theirs(pg, f"SELECT extract(epoch from {lit})"), iv
        canon = canonical(iv)
        assert canon.span() == iv.span()
        signs = {(x > 0) - (x < 0) for x in canon} - {0}
        assert len(signs) <= 1 and abs(canon.days) < 30 and abs(canon.micros) < 86_400_000_000
        if abs(canon.months) < 2**31:
            equal = _theirs(pg, f"SELECT {lit} = {_pg_literal(canon)}")
            assert equal == "True", (iv, canon)


JUSTIFY_EDGES = [
    Interval(2**31 - 1, 30, -1),
    Interval(-(2**31), -30, 1),
    Interval(2**31 - 1, 29, 86_400_000_000),
    Interval(2**31 - 1, 2**31 - 1, 0),
    Interval(0, 2**31 - 1, 86_400_000_000),
    Interval(0, -(2**31), -86_400_000_000),
    Interval(2**31 - 1, -(2**31), 360_000_000_000),
    Interval(0, -(2**31), 172_800_000_000),
    Interval(1, -1, 0),
    Interval(-1, 1, 0),
    Interval(1, 0, -1),
    Interval(-1, 0, 1),
    Interval(0, 1, -3_600_000_000),
    Interval(-1, 35, 3_600_000_000),
    Interval(0, 2**31 - 1, 2**62),
    Interval(0, -(2**31), -(2**62)),
]


def test_justify_functions_follow_postgres(pg: psycopg.Connection[Any], seed: int) -> None:
    """justify_days / justify_hours / justify_interval: the values, the signs the parts take
    and where PostgreSQL finds them out of range (22008)."""
    rng = random.Random(seed)
    problems = []
    cases = [*JUSTIFY_EDGES, *(_random_interval(rng) for _ in range(150))]
    for iv in cases:
        if abs(iv.micros) > 2**62:  # PostgreSQL cannot spell the operand
            continue
        for name, fn in (
            ("justify_days", justify_days),
            ("justify_hours", justify_hours),
            ("justify_interval", justify_interval),
        ):
            sql = f"SELECT {name}({_pg_literal(iv)})"
            theirs = _theirs(pg, sql)
            ours = _ours(lambda fn=fn, iv=iv: fn(iv))
            if ours != theirs:
                problems.append(f"{sql}: ours {ours}, PostgreSQL {theirs}")
    assert not problems, "\n".join(problems[:10])


TEXTS = [
    "1 day", "1.5 years 1.5 mons 1.5 weeks 1.5 days 1.5 hours", "-1 days +02:03:00", "1 day ago",
    "@ 1 hour", "1:2", "-1:02:03.5", "1 2:03:04", "5", "1.5", "abc", "3000000000 days",
    "2562047789:00:00", "1 year 2 mons -3 days +04:05:06.5", "  2 weeks  ", "10 ms", "7 us",
    "0.5 mon", "1 day 2 days", "", "1 day ago ago", "ago", "+3 hours", "2147483648 mons",
    "-1 mon -2 days -03:00:00", "1 decade 1 century", "1 millennium", "1 hour 30",
    "-3179840925202370096 microseconds", "9223372036854775807 us", "2305843009213693953 us",
    "-9007199254740993 microseconds 1.5 ms", "178956971 years", "178956970 years 8 mons",
    "-178956970 years -9 mons", "-1 millennium 1 century 2147483647 mons", "2147483648 years",
    "1 year ago 2 days", "ago 1 day", "1 ago", "1 day ago 02:00", "1 day ago 5", "ago",
    "0:60:00", "0:180", "-0:180:00", "+0:60:00", "0:00:60", "0:00:60.5", "0:00:61",
    "-0:59:60.5", "1 day 0:60", "1 day -0:60", "@ 0:60", "0:60 ago", "100:59:60",
]  # fmt: skip
"""ISO 8601 (``P1Y``) is not read (documented)."""


def test_interval_text_reads_as_postgres_reads_it(pg: psycopg.Connection[Any]) -> None:
    problems = []
    for text in TEXTS:
        theirs = _theirs(pg, f"SELECT '{text}'::interval")
        ours = _ours(lambda text=text: parse_interval(text))
        if ours != theirs:  # the text, or the same SQLSTATE
            problems.append(f"{text!r}: ours {ours}, PostgreSQL {theirs}")
    assert not problems, "\n".join(problems)


def _runtime_text(rng: random.Random) -> str:
    """A text in the form a text column's cast reads (spate.repr.interval_input)."""
    from spate.repr import interval_input as ii

    def count() -> str:
        n = rng.choice([rng.randint(0, 99), rng.randint(0, 999_999_999), rng.randint(0, 5000)])
        return rng.choice(["", "+", "-", "-"]) + str(n)

    def word(words: str) -> str:
        w = rng.choice(words.split("|"))
        return "".join(c.upper() if rng.random() < 0.2 else c for c in w)

    units = [w for _, w in ii.YEAR_UNITS] + [
        ii._DECADES, ii._YEARS, ii._MONTHS, ii._WEEKS, ii._DAYS
    ]  # fmt: skip
    parts = [
        f"{count()}{rng.choice([' ', '', '  '])}{word(w)}" for w in units if rng.random() < 0.4
    ]
    if rng.random() < 0.5:
        sign = rng.choice(["", "+", "-"])
        t = f"{sign}{rng.choice([rng.randint(0, 99), rng.randint(0, 999_999_999)])}"
        t += f":{rng.randint(0, 59):02d}"
        if rng.random() < 0.7:
            t += f":{rng.randint(0, 59):02d}"
            if rng.random() < 0.5:
                t += "." + str(rng.randint(0, 999999)).zfill(6)[: rng.randint(1, 6)]
        parts.append(t)
    else:
        parts += [f"{count()} {word(w)}" for _, w in ii.MICRO_UNITS if rng.random() < 0.4]
    if not parts:
        parts.append("1 day")
    text = rng.choice(["", "@ ", "@", " "]) + " ".join(parts)
    if rng.random() < 0.3:
        text += " ago"
    return text + rng.choice(["", " ", "\t"])


def test_runtime_interval_text_reads_as_postgres_reads_it(
    pg: psycopg.Connection[Any], seed: int
) -> None:
    """A text column cast to interval: every text of the run-time form has PostgreSQL's value
    or its error (SQLSTATE); texts outside the form are refused (0A000), never misread."""
    from spate.repr.interval_input import read

    rng = random.Random(seed)
    fixed = [
        "1 year 2 mons -3 days +04:05:06.5", "-1 years -2 mons", "00:00:00", "-00:00:01",
        "178956971 years", "178956970 years 8 mons", "-178956970 years -9 mons ago",
        "-1 millennium 1 century 999999999 mons", "99999999 century", "2147483 weeks",
        "1 week 1 day", "10ms", "1DAY", "@ 1 day ago", "1 day -02:00 ago", "999999999:59:59.999999",
    ]  # fmt: skip
    problems = []
    for text in [*fixed, *(_runtime_text(rng) for _ in range(400))]:
        theirs = _theirs(pg, f"SELECT '{text}'::interval")
        ours = _ours(lambda text=text: read(text))
        if ours != theirs:
            problems.append(f"{text!r}: ours {ours}, PostgreSQL {theirs}")
    for text in [
        "1 hour 02:00",
        "2 hours 1 day",
        "1.5 days",
        "1 day 1 day",
        "01:60",
        "1 fortnight",
    ]:
        assert _ours(lambda text=text: read(text)) == "error 0A000", text
    for text in ["soon", "", " ", "@", "ago", "day", "epoch", "infinity", "AB"]:  # no number
        assert _ours(lambda text=text: read(text)) == _theirs(pg, f"SELECT '{text}'::interval")
    assert not problems, "\n".join(problems[:10])
