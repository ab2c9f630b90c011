"""Evaluation errors in the IR and in SQL's lowering, by the reference semantics (no Spark):
RaiseError is an error value, lazy inside CASE; SQL's division by zero, failing casts, int64
overflow and a scalar subquery with more than one row fail with PostgreSQL's SQLSTATEs; the
record a dataflow keeps and the read error built from it carry the SQLSTATE to clients."""

from __future__ import annotations

from collections import Counter

import pytest

from spate.codec import decode, encode
from spate.errors import EvalError, EvaluationFailed, describe_error, error_record
from spate.ids import GlobalId
from spate.pgwire.errors import sqlstate_of
from spate.plan.evaluation.relation import evaluate
from spate.plan.evaluation.scalar import eval_scalar
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    Case,
    ColumnRef,
    Literal,
    RaiseError,
    ScalarExpr,
    show,
)
from spate.repr import INT64, TEXT, RelationDesc
from spate.sql import MemoryCatalog, plan_statements
from spate.sql import statements as st

COLUMNS = RelationDesc.of(("a", INT64), ("b", INT64)).columns
DIV = Case(
    (
        (
            CallBinary(BinaryFunc.EQ, ColumnRef(1), Literal(0, INT64)),
            RaiseError("22012", "division by zero", INT64),
        ),
    ),
    CallBinary(BinaryFunc.DIV, ColumnRef(0), ColumnRef(1)),
)


def test_raise_error_is_lazy_inside_case_and_carries_its_sqlstate() -> None:
    assert eval_scalar(DIV, COLUMNS, (7, 2), 0) == 3
    assert eval_scalar(DIV, COLUMNS, (7, None), 0) is None  # NULL = 0 is not true
    with pytest.raises(EvalError, match="division by zero") as caught:
        eval_scalar(DIV, COLUMNS, (7, 0), 0)
    assert caught.value.sqlstate == "22012"
    assert sqlstate_of(caught.value) == "22012"
    assert show(DIV, ["a", "b"]) == (
        "CASE WHEN (b = 0) THEN error('division by zero') ELSE (a / b) END"
    )
    assert decode(encode(DIV), ScalarExpr) == DIV


def test_int64_overflow_is_22003() -> None:
    add = CallBinary(BinaryFunc.ADD, ColumnRef(0), ColumnRef(1))
    with pytest.raises(EvalError, match="overflow") as caught:
        eval_scalar(add, COLUMNS, (2**63 - 1, 1), 0)
    assert caught.value.sqlstate == "22003"


T = GlobalId.user(1)
U = GlobalId.user(2)


def _catalog() -> MemoryCatalog:
    db = MemoryCatalog()
    db.add("t", RelationDesc.of(("a", INT64, False), ("b", INT64, False), ("s", TEXT)))
    db.add("u", RelationDesc.of(("x", INT64)))
    return db


def _run(sql: str, t: list[tuple[object, ...]], u: list[tuple[object, ...]]) -> Counter[object]:
    db = _catalog()
    [stmt] = plan_statements(sql, db)
    assert isinstance(stmt, st.Select)
    ids = {name: db.items[name].id for name in ("t", "u")}
    inputs = {ids["t"]: Counter(t), ids["u"]: Counter(u)}
    return Counter(evaluate(stmt.plan, inputs, 0))


ROWS = [(6, 3, "12"), (8, 4, "7")]


@pytest.mark.parametrize(
    ("sql", "bad_t", "bad_u", "sqlstate"),
    [
        ("SELECT a / (b - 2) FROM t", [(1, 2, "1")], [], "22012"),
        ("SELECT a % (b - 2) FROM t", [(1, 2, "1")], [], "22012"),
        ("SELECT a::float8 / (b - 2) FROM t", [(1, 2, "1")], [], "22012"),
        ("SELECT a::numeric / (b - 2) FROM t", [(1, 2, "1")], [], "22012"),
        ("SELECT s::int FROM t", [(1, 2, "abc")], [], "22P02"),
        ("SELECT CAST(s AS bigint) FROM t", [(1, 2, "1.5")], [], "22P02"),
        ("SELECT a + b FROM t", [(2**63 - 1, 1, "1")], [], "22003"),
        ("SELECT a, (SELECT x FROM u) FROM t", [], [(1,), (2,)], "21000"),
        ("SELECT a, (SELECT x FROM u WHERE x = a) FROM t", [], [(6,), (6,)], "21000"),
    ],
)
def test_sql_fails_where_postgresql_does_and_only_there(
    sql: str, bad_t: list[tuple[object, ...]], bad_u: list[tuple[object, ...]], sqlstate: str
) -> None:
    good = _run(sql, ROWS, [(1,)])
    assert sum(good.values()) == 2
    with pytest.raises(EvalError) as caught:
        _run(sql, ROWS + bad_t, bad_u or [(1,)])
    assert caught.value.sqlstate == sqlstate, caught.value


def test_try_cast_still_gives_null() -> None:
    got = _run("SELECT TRY_CAST(s AS int) FROM t", [(1, 2, "abc")], [])
    assert got == Counter({(None,): 1})


def test_a_scalar_subquery_without_rows_is_null() -> None:
    got = _run("SELECT a, (SELECT x FROM u WHERE x = a) FROM t", ROWS, [(6,)])
    assert got == Counter({(6, 6): 1, (8, None): 1})


def test_the_read_error_names_everything_and_carries_the_sqlstate() -> None:
    record = error_record("22012", "division by zero", "(a / b)", "(a=1, b=0)")
    text = describe_error("materialized view v", record, 3)
    assert text == (
        "materialized view v: division by zero [SQLSTATE 22012] evaluating (a / b) on row "
        "(a=1, b=0) (3 errors in all)"
    )
    e = EvaluationFailed.of_record("materialized view v", record, 3)
    assert str(e) == text and e.sqlstate == "22012" and sqlstate_of(e) == "22012"
    assert e.pg_message == "division by zero"


def test_postgresql_text_travels_as_data_and_is_never_read_back() -> None:
    """PostgreSQL's text of an evaluation error is given with it, never extracted from the
    message: a value that looks like spate's message layout (``what: text [SQLSTATE x]
    evaluating …``) stays whole."""
    odd = 'invalid input syntax for type date: "a: b [SQLSTATE 22007] evaluating c"'
    e = EvaluationFailed.of("query", EvalError(odd, sqlstate="22007"))
    assert e.pg_message == odd and e.sqlstate == "22007"
    assert str(e) == f"query: {odd} [SQLSTATE 22007]"
    given = "reading t: x [SQLSTATE 22012] evaluating y"
    assert EvaluationFailed(given, "22012").pg_message == given  # none given: the message
    assert EvaluationFailed(given, "22012", "division by zero").pg_message == "division by zero"


def test_the_evaluators_row_and_expression_are_not_postgresqls_text() -> None:
    """A Map that fails names its expression and row in the message; PostgreSQL's text stays
    the scalar's own, as data."""
    with pytest.raises(EvalError) as raised:
        _run("SELECT a / (b - 2) FROM t", [(1, 2, "1")], [])
    assert " evaluating " in str(raised.value)
    assert raised.value.pg_message == "division by zero"
    failed = EvaluationFailed.of("query", raised.value)
    assert failed.pg_message == "division by zero" and failed.sqlstate == "22012"
