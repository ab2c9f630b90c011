"""``to_char(number, format)`` on Spark agrees with the reference renderer.

Seeded random formats (the seed is printed) of PostgreSQL's number patterns are compiled for
numeric, bigint, integer, double precision and real columns, and each is evaluated over edge
values and random ones, on Spark and in the reference (itself compared with PostgreSQL in
``tests/sql/test_to_char_numbers.py``)."""

from __future__ import annotations

import math
import os
import random
import struct
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from spate.errors import EvalError
from spate.plan.expr import CallVariadic, ColumnRef, Literal, VariadicFunc
from spate.plan.numformat import parse_number_format, refusal
from spate.repr.desc import RelationDesc
from spate.repr.types import FLOAT64, INT64, TEXT, numeric
from tests.render.test_scalar_spark import check, exact_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["exact_spark"]

pytestmark = [pytest.mark.integration]

V = VariadicFunc
DESC = RelationDesc.of(
    ("n", numeric(20, 6)), ("m", numeric(38, 0)), ("b", INT64), ("i", INT64), ("f", FLOAT64),
    ("r", FLOAT64),
)  # fmt: skip
FUNCS = {
    "n": V.TO_CHAR_NUMERIC, "m": V.TO_CHAR_NUMERIC, "b": V.TO_CHAR_INT8, "i": V.TO_CHAR_INT4,
    "f": V.TO_CHAR_FLOAT8, "r": V.TO_CHAR_FLOAT4,
}  # fmt: skip
KINDS = {"n": "numeric", "m": "numeric", "b": "int8", "i": "int4", "f": "float8", "r": "float4"}
PIECES = ["9"] * 8 + ["0"] * 3 + [".", "D", ",", "G", "FM", "S", "MI", "PL", "SG", "PR", "V"]
PIECES += [" ", "x", '"ab"', "-"]


def single(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def random_format(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 16)))


def random_row(rng: random.Random) -> tuple[object, ...]:
    scale = rng.randint(0, 6)
    n = Decimal(rng.randint(-(10 ** rng.randint(0, 14)), 10 ** rng.randint(0, 14))).scaleb(-scale)
    m = Decimal(rng.randint(-(10 ** rng.randint(0, 37)), 10 ** rng.randint(0, 37)))
    b = rng.randint(-(10 ** rng.randint(0, 18)), 10 ** rng.randint(0, 18))
    i = rng.randint(-(2**31), 2**31 - 1) if rng.random() < 0.3 else rng.randint(-2000, 2000)
    f = rng.choice(
        [
            rng.uniform(-1e6, 1e6),
            rng.uniform(-2, 2),
            rng.randint(-1000, 1000) / 8,
            10 ** rng.uniform(-5, 20) * rng.choice([1, -1]),
            rng.randint(-(2**62), 2**62) * 1.0,
        ]
    )
    r = single(
        rng.choice(
            [rng.uniform(-1e5, 1e5), rng.randint(-1000, 1000) / 16, 10 ** rng.uniform(-4, 12)]
        )
    )
    return (n, m, b, i, f, r)


EDGE_ROWS = [
    (Decimal("0"), Decimal("0"), 0, 0, 0.0, 0.0),
    (Decimal("-0.000001"), Decimal(-(10**37)), -(2**63), -(2**31), -0.5, -0.5),
    (Decimal("99999999999999.999999"), Decimal(10**38 - 1), 2**63 - 1, 2**31 - 1, 2.675, 0.125),
    (Decimal("0.5"), Decimal(5), 5, 5, math.nan, math.inf),
    (Decimal("-9.95"), Decimal(-95), -95, -95, -math.inf, single(-9.95)),
    (Decimal("1234.5678"), Decimal(1234), 1234, 1234, 2.0**60, single(65504.0)),
    (None, None, None, None, None, None),
]


def test_random_number_formats_match_reference(exact_spark: SparkSession) -> None:
    seed = int(os.environ.get("SPATE_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    rows = EDGE_ROWS + [random_row(rng) for _ in range(20)]
    exprs = []
    while len(exprs) < 12:
        fmt = random_format(rng)
        col = rng.choice(list(FUNCS))
        try:
            parsed = parse_number_format(fmt)
        except EvalError:
            continue
        if refusal(KINDS[col], parsed) is not None:
            continue
        exprs.append(
            CallVariadic(FUNCS[col], (ColumnRef(DESC.names.index(col)), Literal(fmt, TEXT)))
        )
    check(exact_spark, DESC, rows, exprs, max_failing=3)


COMMON = [
    "9999.99", "FM999,990.00", "S9999", "9999PR", "SG0000.00", "FM9.990", "99V99", ".99",
]  # fmt: skip


@pytest.mark.parametrize("col", list(FUNCS))
def test_common_formats_match_reference(exact_spark: SparkSession, col: str) -> None:
    exprs = [
        CallVariadic(FUNCS[col], (ColumnRef(DESC.names.index(col)), Literal(fmt, TEXT)))
        for fmt in COMMON
        if not ("V" in fmt and col == "i")
    ]
    check(exact_spark, DESC, EDGE_ROWS, exprs, max_failing=3)
