"""spate.plan.numeric_math against PostgreSQL: sqrt, exp, ln, log and power of numerics give
PostgreSQL's digits and PostgreSQL's scale for each value, on seeded random values (the seed is
printed) and edge values; errors carry PostgreSQL's SQLSTATE. A result of more than 20 integer
digits, which no spate column holds (docs/sql.md), may be an overflow error instead."""

from __future__ import annotations

import random
from decimal import Decimal

from spate.plan import numeric_math as nm
from spate.plan.errors import EvalError


def _value(rng: random.Random) -> Decimal:
    digits = rng.randrange(1, 12)
    scale = rng.randrange(0, 9)
    n = rng.randrange(10 ** (digits - 1), 10**digits)
    return Decimal(n).scaleb(-scale)


EDGES = [
    Decimal("1"), Decimal("2"), Decimal("0.001"), Decimal("1.000"), Decimal("0.9"), Decimal("1.1"),
    Decimal("1.0001"), Decimal("0.99999"), Decimal("10000"), Decimal("123456789.123"),
    Decimal("0.00000001"), Decimal("3.455"), Decimal("100"), Decimal("2.50"),
]  # fmt: skip


def _scale(d: Decimal) -> int:
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int)
    return max(-exponent, 0)


def _ours(sql_fn: str, args: list[Decimal]) -> tuple[str, object]:
    s = [_scale(a) for a in args]
    try:
        match sql_fn:
            case "sqrt":
                return "ok", nm.sqrt(args[0], s[0], "f")
            case "exp":
                return "ok", nm.exp(args[0], s[0], "f")
            case "ln":
                return "ok", nm.ln(args[0], s[0], "f")
            case "log":
                return "ok", nm.log(args[0], args[1], s[0], s[1], "f")
            case _:
                return "ok", nm.power(args[0], args[1], s[0], s[1], "f")
    except EvalError as e:
        return "error", e.sqlstate


def test_numeric_math_matches_postgresql(postgres_url: str, seed: int) -> None:
    import psycopg

    rng = random.Random(seed)
    cases: list[tuple[str, list[Decimal]]] = []
    values = EDGES + [_value(rng) for _ in range(60)]
    for v in values:
        cases += [("sqrt", [v]), ("ln", [v]), ("log", [Decimal(10), v])]
        cases += [("exp", [v if v < 80 else v.scaleb(-v.adjusted())])]
        cases += [("log", [rng.choice(values), v])]
        small = Decimal(rng.randrange(-40, 41)).scaleb(-rng.randrange(0, 3))
        base = v if v < 1000 else v.scaleb(-v.adjusted())
        cases += [("power", [base, small]), ("power", [-base, Decimal(rng.randrange(-5, 6))])]
    cases += [
        ("sqrt", [Decimal("-1")]), ("ln", [Decimal("0")]), ("ln", [Decimal("-2.5")]),
        ("log", [Decimal("1"), Decimal("5")]), ("power", [Decimal("0"), Decimal("-1")]),
        ("power", [Decimal("-2"), Decimal("0.5")]), ("power", [Decimal("0"), Decimal("0")]),
        ("sqrt", [Decimal("0.000")]), ("exp", [Decimal("0")]), ("power", [Decimal("0"), Decimal("2.5")]),
    ]  # fmt: skip
    bad = []
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for fn, args in cases:
            placeholders = ", ".join(f"'{a}'::numeric" for a in args)
            try:
                (got,) = conn.execute(f"SELECT {fn}({placeholders})").fetchone()  # type: ignore[misc]
                want: tuple[str, object] = ("ok", got)
            except psycopg.Error as e:
                want = ("error", e.sqlstate)
            ours = _ours(fn, args)
            same = ours == want and (
                want[0] == "error" or str(ours[1]) == str(want[1])  # digits and scale
            )
            if ours == ("error", "22003") and want[0] == "ok":
                same = abs(want[1]) >= 10**20  # type: ignore[arg-type]  # beyond spate's digits
            if not same:
                bad.append(f"{fn}({', '.join(map(str, args))}): PostgreSQL {want}, spate {ours}")
    assert not bad, f"{len(bad)} of {len(cases)} differ:\n" + "\n".join(bad[:20])
