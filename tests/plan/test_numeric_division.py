"""Numeric division rounds each quotient as PostgreSQL does (spate.plan.numeric_division),
checked against the PostgreSQL server on seeded random operands of several types."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from spate.plan.errors import EvalError
from spate.plan.evaluation.scalar import eval_scalar
from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef
from spate.plan.numeric_division import divide, division_scale
from spate.repr.desc import Column
from spate.repr.types import numeric

TYPES = [(38, 0, 19, 0), (8, 3, 19, 0), (8, 2, 8, 3), (38, 10, 38, 10), (1, 0, 5, 0), (20, 4, 6, 6)]


def _value(rng: random.Random, precision: int, scale: int) -> Decimal:
    digits = rng.randint(1, precision)
    unscaled = rng.randint(1, 10**digits - 1) * rng.choice((1, -1))
    return Decimal(unscaled).scaleb(-scale)


def test_quotients_of_the_corpus() -> None:
    # PostgreSQL: 1 / 3::numeric, 10000::numeric / 3, 1::numeric / 30000, -2::numeric / 3
    assert str(divide(Decimal(1), Decimal(3), 0, 0, 24)) == "0.33333333333333333333"
    assert str(divide(Decimal(10000), Decimal(3), 0, 0, 24)) == "3333.3333333333333333"
    assert str(divide(Decimal(1), Decimal(30000), 0, 0, 24)) == "0.000033333333333333333333"
    assert str(divide(Decimal(-2), Decimal(3), 0, 0, 24)) == "-0.66666666666666666667"
    # the type scale caps the digits: rounded half away from zero there
    assert str(divide(Decimal(2), Decimal(3), 0, 0, 16)) == "0.6666666666666667"


def test_division_scale_leaves_room_for_the_integer_digits() -> None:
    assert division_scale(numeric(38, 0), numeric(19, 0)) == 16  # sum(bigint) / count
    assert division_scale(numeric(8, 3), numeric(19, 0)) == 24
    assert division_scale(numeric(38, 30), numeric(5, 0)) == 30  # never below an operand's


def test_evaluator_divides_like_postgres(postgres_url: str, seed: int) -> None:
    import psycopg

    rng = random.Random(seed)
    with psycopg.connect(postgres_url) as conn:
        for pa, sa, pb, sb in TYPES:
            a_type, b_type = numeric(pa, sa), numeric(pb, sb)
            columns = [Column("a", a_type, False), Column("b", b_type, False)]
            expr = CallBinary(BinaryFunc.DIV, ColumnRef(0), ColumnRef(1))
            out = division_scale(a_type, b_type)
            pairs = [(_value(rng, pa, sa), _value(rng, pb, sb)) for _ in range(60)]
            for a, b in pairs:
                row = conn.execute(
                    f"SELECT %s::numeric({pa},{sa}) / %s::numeric({pb},{sb})", (a, b)
                ).fetchone()
                assert row is not None
                want = row[0]
                try:
                    got = eval_scalar(expr, columns, (a, b), 0)
                except EvalError:
                    assert abs(want) >= Decimal(10) ** (38 - out), (a, b, want)
                    continue
                assert isinstance(got, Decimal)
                exponent = want.as_tuple().exponent
                assert isinstance(exponent, int)
                if -exponent <= out:
                    assert got == want, (a_type, b_type, a, b, want, got)
                else:  # PostgreSQL kept more digits than the type holds
                    assert abs(got - want) <= Decimal(1).scaleb(-out) / 2, (a, b, want, got)


@pytest.mark.parametrize("divisor", [Decimal(0), Decimal("0.000")])
def test_division_by_zero_is_null(divisor: Decimal) -> None:
    columns = [Column("a", numeric(5, 0), False), Column("b", numeric(5, 3), False)]
    expr = CallBinary(BinaryFunc.DIV, ColumnRef(0), ColumnRef(1))
    assert eval_scalar(expr, columns, (Decimal(1), divisor), 0) is None
