"""``to_char(number, format)`` agrees with PostgreSQL: seeded random formats of its number
patterns (the seed is printed; ``SPATE_TEST_SEED`` replays one) over random values of each
numeric type, rendered by spate's reference (:mod:`spate.plan.numformat`) and by the server,
errors included; and the SQL binding of the call (types, the format as written, refusals)."""

from __future__ import annotations

import math
import os
import random
import struct
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest

from spate.errors import EvalError
from spate.plan.numformat import parse_number_format, refusal, to_char_number
from spate.sql import SqlError
from tests.sql._plan_engine import ReferenceEngine

pytestmark = [pytest.mark.integration]

PIECES = ["9"] * 8 + ["0"] * 3 + [".", "D", ",", "G", "FM", "S", "MI", "PL", "SG", "PR", "V"]
PIECES += ["EEEE", " ", "x", '"ab"', "-", "fm", "d", "g", "mi", "s"]
KINDS = ("numeric", "float8", "float4", "int8", "int4")


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


def single(x: float) -> float:
    try:
        return float(struct.unpack("f", struct.pack("f", x))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def value(rng: random.Random, kind: str) -> Decimal | int | float:
    if kind == "numeric":
        n = rng.randint(-(10 ** rng.randint(0, 14)), 10 ** rng.randint(0, 14))
        return Decimal(n).scaleb(-rng.randint(0, 6))
    if kind in ("float8", "float4"):
        x = rng.choice(
            [
                rng.uniform(-1e6, 1e6),
                rng.uniform(-2, 2),
                rng.randint(-1000, 1000) / 8,
                10 ** rng.uniform(-5, 20) * rng.choice([1, -1]),
                rng.choice([0.0, math.inf, -math.inf, math.nan]),
            ]
        )
        return single(x) if kind == "float4" else x
    if kind == "int8":
        return rng.randint(-(10 ** rng.randint(0, 18)), 10 ** rng.randint(0, 18))
    return rng.randint(-(2**31), 2**31 - 1) if rng.random() < 0.3 else rng.randint(-2000, 2000)


def literal(v: Decimal | int | float) -> str:
    if isinstance(v, float):
        return (
            "NaN"
            if math.isnan(v)
            else {math.inf: "Infinity", -math.inf: "-Infinity"}.get(v, repr(v))
        )
    return str(v)


def postgres(conn: psycopg.Connection[tuple[object, ...]], v: object, kind: str, fmt: str) -> str:
    try:
        row = conn.execute(f"SELECT to_char(%s::{kind}, %s)", (literal(v), fmt)).fetchone()  # type: ignore[arg-type]
    except psycopg.Error as e:
        return "ERROR " + str(e).split("\n")[0]
    assert row is not None
    return str(row[0])


def spate(v: Decimal | int | float, kind: str, fmt: str) -> str | None:
    """spate's answer; ``None`` for a pattern spate does not support."""
    try:
        parsed = parse_number_format(fmt)
        out = to_char_number(v, kind, parsed)
    except EvalError as e:
        if getattr(e, "unsupported", False):
            return None
        return "ERROR " + str(e)
    return out


def test_random_formats_and_values_match_postgresql(
    pg: psycopg.Connection[tuple[object, ...]],
) -> None:
    seed = int(os.environ.get("SPATE_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    bad = []
    compared = 0
    for _ in range(3000):
        kind = rng.choice(KINDS)
        fmt = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))
        v = value(rng, kind)
        mine = spate(v, kind, fmt)
        if mine is None:
            continue
        compared += 1
        want = postgres(pg, v, kind, fmt)
        if mine != want:
            bad.append(
                f"to_char({literal(v)}::{kind}, {fmt!r}): spate {mine!r}, PostgreSQL {want!r}"
            )
    assert compared > 2500
    assert not bad, "\n".join(bad[:20])


COMMON = (
    "9999.99", "FM9999.99", "999,999.00", "FM999,990.00", "S9999", "9999S", "9999MI", "9999PR",
    "FM9999PR", "PL9999", "SG9999", "0000.00", "FM0000.00", "9G999D99", "FM9.990", "99V99",
    ".99", "9.99EEEE", "FM", '"total: "FM999,999,990.00', "fm999d99mi", "99",
)  # fmt: skip
VALUES = (0, 0.5, -0.5, 1234.5678, -1234.5678, 99999, 0.04, 2.675, -9.95, 0.125, 1e15, 123456789)


@pytest.mark.parametrize("kind", KINDS)
def test_common_formats_match_postgresql(
    pg: psycopg.Connection[tuple[object, ...]], kind: str
) -> None:
    bad = []
    for fmt in COMMON:
        for raw in VALUES:
            if kind.startswith("int"):
                v: Decimal | int | float = int(raw)
                if kind == "int4" and ("V" in fmt or abs(v) >= 2**31):
                    continue
            elif kind == "numeric":
                v = Decimal(repr(raw))
            else:
                v = single(float(raw)) if kind == "float4" else float(raw)
            mine, want = spate(v, kind, fmt), postgres(pg, v, kind, fmt)
            if mine != want:
                bad.append(f"to_char({literal(v)}::{kind}, {fmt!r}): {mine!r}, PostgreSQL {want!r}")
    assert not bad, "\n".join(bad)


def test_sql_binds_each_type_and_keeps_the_format_as_written() -> None:
    e = ReferenceEngine()
    e.sql("CREATE TABLE t (a numeric(12,4), b bigint, i int, s smallint, d float8, r real)")
    e.sql("INSERT INTO t VALUES (1234.5678, -42, 7, -3, 2.675, 0.1)")
    rows = e.rows(
        "SELECT to_char(a, 'fm999,990.00'), to_char(b, 'S999'), to_char(i, '99PR'), "
        "to_char(s, 'FM00mi'), to_char(d, '9.99'), to_char(r, '9.999'), "
        """to_char(a, '"dd mi"9999v9') FROM t"""
    )
    assert rows == [("1,234.57", " -42", "  7 ", "03-", " 2.67", "  .100", "dd mi 12346")]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT to_char(1.5, 'L99')", 'pattern "L" is not supported'),
        ("SELECT to_char(1.5, 'RN')", 'pattern "RN" is not supported'),
        ("SELECT to_char(1.5, '99.9.9')", "multiple decimal points"),
        ("SELECT to_char(1.5, '99V9.9')", 'cannot use "V" and decimal point together'),
        ("SELECT to_char(1.5, '9.9EEEE')", '"EEEE" is not supported'),
        ("SELECT to_char(1.5::float8, '9999999999999999999')", "more than 18 integer digits"),
        ("SELECT to_char(12, '99' || '9')", "constant format"),
    ],
)
def test_formats_spate_refuses_are_refused_when_planned(query: str, message: str) -> None:
    with pytest.raises(SqlError, match=message.replace("(", r"\(")):
        ReferenceEngine().sql(query)


def test_refusals_are_the_formats_spark_cannot_write_exactly() -> None:
    assert refusal("float8", parse_number_format("9" * 18 + ".99")) is None
    assert refusal("float8", parse_number_format("9" * 17 + "V99")) is not None
    assert refusal("numeric", parse_number_format("9" * 30)) is None
