"""Interval values print as PostgreSQL prints them and compare by PostgreSQL's span (checked
against the PostgreSQL at ``SPATE_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import random

import pytest

from spate.repr.interval import Interval

FIXED = [
    (Interval(0, 1, 2 * 3_600_000_000), "1 day 02:00:00"),
    (Interval(0, 0, -1_000_000), "-00:00:01"),
    (Interval(14, 0, 0), "1 year 2 mons"),
    (Interval(0, 0, 0), "00:00:00"),
    (Interval(-1, 2, -3), "-1 mons +2 days -00:00:00.000003"),
    (Interval(0, -1, 7_380_000_000), "-1 days +02:03:00"),
    (Interval(-25, -3, 0), "-2 years -1 mons -3 days"),
    (Interval(1, 1, 1_500_000), "1 mon 1 day 00:00:01.5"),
    (Interval(0, 0, 400 * 3_600_000_000), "400:00:00"),
]


def _pg_text(cur: object, i: Interval) -> str:
    cur.execute(  # type: ignore[attr-defined]
        "SELECT ((%s || ' mons')::interval + (%s || ' days')::interval"
        " + (%s || ' microseconds')::interval)::text",
        (str(i.months), str(i.days), str(i.micros)),
    )
    return str(cur.fetchone()[0])  # type: ignore[attr-defined]


@pytest.mark.parametrize(("value", "text"), FIXED)
def test_fixed_intervals_print_as_postgres(value: Interval, text: str) -> None:
    assert value.text() == text == str(value)


def test_random_intervals_print_and_compare_as_postgres(postgres_url: str) -> None:
    import psycopg

    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)

    def draw() -> Interval:
        def field(scale: int) -> int:
            return rng.choice([0, rng.randint(-scale, scale), rng.randint(-3, 3)])

        return Interval(field(3000), field(100_000), field(10**14))

    with psycopg.connect(postgres_url) as conn, conn.cursor() as cur:
        cur.execute("SET IntervalStyle = postgres")
        for _ in range(300):
            a, b = draw(), draw()
            assert a.text() == _pg_text(cur, a), a
            cur.execute(
                "SELECT %s::interval < %s::interval, %s::interval = %s::interval",
                (a.text(), b.text(), a.text(), b.text()),
            )
            less, equal = cur.fetchone()  # type: ignore[misc]
            assert (a.span() < b.span(), a.span() == b.span()) == (less, equal), (a, b)
        cur.execute("SELECT '1 mon'::interval = '30 days' AND '30 days'::interval = '720:00:00'")
        assert cur.fetchone() == (True,)
        month = Interval(1, 0, 0)
        assert (
            month.span() == Interval(0, 30, 0).span() == Interval(0, 0, 720 * 3600 * 10**6).span()
        )
