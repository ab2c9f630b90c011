"""The ``Window`` node: construction, types, errors, codec, EXPLAIN, and the reference
evaluator's values (the worked examples of PostgreSQL's semantics)."""

from __future__ import annotations

from collections import Counter

import pytest

from spate.codec import decode, encode
from spate.ids import GlobalId
from spate.plan import (
    AggregateExpr,
    AggregateFunc,
    ColumnRef,
    Get,
    InvalidPlan,
    PlanColumnMissing,
    PlanTypeError,
    RelationExpr,
    Window,
    WindowExpr,
    WindowFunc,
    avg,
    col,
    count,
    cume_dist,
    dense_rank,
    desc,
    first_value,
    lag,
    last_value,
    lead,
    lit,
    max_,
    min_,
    now,
    nth_value,
    ntile,
    percent_rank,
    range_between,
    rank,
    row_number,
    rows_between,
    string_agg,
    sum_,
)
from spate.plan.explain import explain
from spate.plan.expr import NAN
from spate.plan.finishing import ColumnOrder
from spate.plan.window import DEFAULT_FRAME
from spate.repr import FLOAT64, INT64, JSONB, TEXT, RelationDesc, numeric
from spate.testing.reference import evaluate
from tests.plan.fixtures import BIDS

T_ID = GlobalId.user(7)
T_DESC = RelationDesc.of(("p", INT64, True), ("y", INT64, True), ("x", INT64, True))
T = Get(T_ID, T_DESC)


def run(plan: RelationExpr, rows: dict[tuple[object, ...], int]) -> Counter[tuple[object, ...]]:
    return evaluate(plan, {T_ID: rows}, 0)


# --- construction ----------------------------------------------------------------------------


def test_output_is_the_input_then_one_typed_column_per_function() -> None:
    w = BIDS.window(
        ["auction"],
        order_by=[desc("price")],
        rn=row_number(),
        r=rank(),
        dr=dense_rank(),
        prev=lag(col("price")),
        nxt=lead(col("channel"), 2, "none"),
        n=count(),
        nc=count(col("channel")),
        s=sum_(col("price")),
        a=avg(col("price")),
        lo=min_(col("channel")),
        hi=max_(col("price")),
    )
    assert w.partition_by == (0,)
    assert w.order_by == (ColumnOrder(2, desc=True),)
    assert w.desc.names[:5] == BIDS.desc.names
    added = {c.name: (str(c.type), c.nullable) for c in w.desc.columns[5:]}
    assert added == {
        "rn": ("int64", False),
        "r": ("int64", False),
        "dr": ("int64", False),
        "prev": ("int64", True),  # NULL past the partition's edge
        "nxt": ("text", True),  # channel is nullable
        "n": ("int64", False),
        "nc": ("int64", False),
        "s": ("int64", False),
        "a": ("float64", False),
        "lo": ("text", True),
        "hi": ("int64", False),
    }


def test_default_names_and_lag_types() -> None:
    w = Window(
        T,
        (),
        (),
        (WindowExpr(WindowFunc.ROW_NUMBER), AggregateExpr(AggregateFunc.SUM, ColumnRef(2))),
    )
    assert w.desc.names[3:] == ("row_number", "sum")
    # a non-null value with a non-null default is never NULL; a wider default widens the value
    bids = BIDS.window(
        order_by=["price"], prev=lag(col("price"), 1, 0), f=lag(col("price"), 1, 0.5)
    )
    assert not bids.desc.columns[5].nullable
    assert bids.desc.columns[6].type == FLOAT64
    assert not BIDS.window(same=lag(col("price"), 0)).desc.columns[5].nullable
    dec = T.map(d=lit(1).cast(numeric(10, 2))).window(
        v=lead(col("d"), 1, lit(2).cast(numeric(6, 4)))
    )
    assert dec.desc.columns[-1].type == numeric(38, 4)


def test_validation_errors_name_the_node_and_the_function() -> None:
    with pytest.raises(PlanColumnMissing, match="partition by 'nope' not found; columns: auction"):
        BIDS.window(["nope"], rn=row_number())
    with pytest.raises(PlanColumnMissing, match=r"Window: partition by: column #9 not found"):
        Window(BIDS, (9,), (), (row_number(),))
    with pytest.raises(PlanColumnMissing, match=r"Window: order by: column #7 not found"):
        Window(BIDS, (), (ColumnOrder(7),), (row_number(),))
    with pytest.raises(InvalidPlan, match="Window: a window needs at least one function"):
        Window(BIDS, (0,), (), ())
    with pytest.raises(PlanTypeError, match=r"Window: s: sum expects int64, float64 or numeric"):
        BIDS.window(s=sum_(col("channel")))
    with pytest.raises(PlanTypeError, match="Window: s: min expects an orderable type"):
        BIDS.map(j=lit("{}").cast(JSONB)).window(s=min_(col("j")))
    with pytest.raises(
        PlanTypeError, match="frame starting from current row cannot have preceding rows"
    ):
        rows_between(0, -1)
    with pytest.raises(
        PlanTypeError, match="frame starting from following row cannot have preceding rows"
    ):
        rows_between(1, 0)
    with pytest.raises(PlanTypeError, match="RANGE frame bound must be UNBOUNDED or CURRENT"):
        range_between(-1, 0)
    with pytest.raises(InvalidPlan, match="Window: frames must be a tuple of WindowFrame"):
        Window(BIDS, (0,), (), (row_number(),), frames=rows_between(0, 1))  # type: ignore[arg-type]
    with pytest.raises(InvalidPlan, match="Window: a frame must be a WindowFrame"):
        Window(BIDS, (0,), (), (row_number(),), frames=("rows",))  # type: ignore[arg-type]
    with pytest.raises(InvalidPlan, match="Window: 1 window functions but 2 frames"):
        Window(BIDS, (0,), (), (row_number(),), frames=(DEFAULT_FRAME, DEFAULT_FRAME))
    with pytest.raises(InvalidPlan, match="frames for no window function: nope"):
        BIDS.window(frames={"nope": rows_between(0, 1)}, rn=row_number())


def test_a_frame_that_may_be_empty_makes_its_functions_nullable() -> None:
    by_price = BIDS.window(
        ["auction"],
        order_by=["price"],
        frame=rows_between(1, 2),
        n=count(),
        s=sum_(col("price")),
        first=first_value(col("auction")),
        rn=row_number(),
        names=string_agg(col("channel"), ";"),
    )
    nullable = {c.name: c.nullable for c in by_price.desc.columns[BIDS.desc.arity :]}
    assert nullable == {"n": False, "s": True, "first": True, "rn": False, "names": True}
    assert "n = count(*) ROWS BETWEEN 1 FOLLOWING AND 2 FOLLOWING" in explain(by_price)
    assert "rn = row_number()," in explain(by_price)  # it reads no frame
    around = BIDS.window(
        ["auction"], frame=rows_between(-1, None), first=first_value(col("auction"))
    )
    assert not around.desc.columns[-1].nullable
    assert "BETWEEN" not in explain(BIDS.window(["auction"], rn=row_number()))
    with pytest.raises(PlanTypeError, match=r"Window: c: count\(DISTINCT …\) is not supported"):
        BIDS.window(c=count(col("price"), distinct=True))
    with pytest.raises(PlanTypeError, match="Window: p: lag: the value price is int64 but the"):
        BIDS.window(p=lag(col("price"), 1, "x"))
    with pytest.raises(PlanColumnMissing, match="Window: p: column 'prise' not found"):
        BIDS.window(p=lead(col("prise")))
    with pytest.raises(InvalidPlan, match="now"):
        BIDS.window(p=lag(now()))
    with pytest.raises(PlanTypeError, match="row_number\\(\\) takes no value expression"):
        WindowExpr(WindowFunc.ROW_NUMBER, ColumnRef(0))
    with pytest.raises(PlanTypeError, match="rank takes no offset"):
        WindowExpr(WindowFunc.RANK, offset=2)
    with pytest.raises(PlanTypeError, match="first_value takes no default"):
        WindowExpr(WindowFunc.FIRST_VALUE, ColumnRef(0), default=ColumnRef(0))
    with pytest.raises(PlanTypeError, match="nth_value: the argument must be >= 1, got 0"):
        nth_value(col("price"), 0)
    with pytest.raises(PlanTypeError, match="ntile: the argument must be >= 1, got 0"):
        ntile(0)
    with pytest.raises(PlanTypeError, match="last_value needs a scalar expression"):
        WindowExpr(WindowFunc.LAST_VALUE)
    with pytest.raises(PlanTypeError, match="lag: offset must be an int"):
        WindowExpr(WindowFunc.LAG, ColumnRef(0), offset="1")  # type: ignore[arg-type]
    with pytest.raises(InvalidPlan, match="duplicate output column 'price'"):
        BIDS.window(price=row_number())
    jsonb = Get(T_ID, RelationDesc.of(("j", JSONB, True)))
    with pytest.raises(PlanTypeError, match="cannot order by jsonb column 'j'"):
        jsonb.window(order_by=["j"], rn=row_number())
    with pytest.raises(InvalidPlan, match="not a window function"):
        Window(BIDS, (), (), (col("price"),))  # type: ignore[arg-type]


def test_roundtrip_and_explain() -> None:
    w = BIDS.window(
        ["auction", "bidder"],
        order_by=[desc("price", nulls_last=True), "date_time"],
        rn=row_number(),
        prev=lag(col("price"), 2, 0),
        n=count(),
        top=max_(col("price")),
    )
    back = decode(encode(w), RelationExpr)
    assert back == w and back.desc == w.desc
    text = w.explain()
    assert text.splitlines()[0] == (
        "Window partition=[auction, bidder] order=[price DESC NULLS LAST, date_time]"
        " [rn = row_number(), prev = lag(price, 2, 0), n = count(*), top = max(price)]"
    )
    assert "every change recomputes" in BIDS.window(n=count()).explain()
    framed = BIDS.window(
        ["auction"],
        order_by=["price"],
        frames={"s": rows_between(-1, 1), "last": range_between(0, None)},
        s=sum_(col("price")),
        rn=row_number(),
        last=last_value(col("bidder")),
        n=count(),
    )
    back = decode(encode(framed), RelationExpr)
    assert back == framed and back.frames == framed.frames
    assert (
        "[s = sum(price) ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING, rn = row_number(),"
        " last = last_value(bidder) RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING,"
        " n = count(*)]"
    ) in framed.explain()


def test_each_function_has_its_frame_and_the_others_the_default() -> None:
    """A frame per function; one given to a function that reads none is settled to the
    default, so that equal windows compare equal."""
    w = Window(
        BIDS,
        (0,),
        (ColumnOrder(2),),
        (row_number(), AggregateExpr(AggregateFunc.COUNT, ColumnRef(2))),
        frames=(rows_between(1, 2), rows_between(1, 2)),
    )
    assert w.frames == (DEFAULT_FRAME, rows_between(1, 2))
    assert w == Window(
        BIDS,
        (0,),
        (ColumnOrder(2),),
        (row_number(), AggregateExpr(AggregateFunc.COUNT, ColumnRef(2))),
        frames=(DEFAULT_FRAME, rows_between(1, 2)),
    )
    assert Window(BIDS, (0,), (), (row_number(),)).frames == (DEFAULT_FRAME,)
    # only the function whose frame may be empty is nullable
    two = BIDS.window(
        order_by=["price"],
        frames={"after": rows_between(1, 1)},
        after=max_(col("price")),
        upto=max_(col("price")),
    )
    assert [c.nullable for c in two.desc.columns[-2:]] == [True, False]


def test_functions_of_one_node_read_one_position_over_identical_rows() -> None:
    """Two copies of a row at positions 0 and 1: one output row holds both functions' values
    at 0, the other both at 1 (the next row's y falls from 30 to 10 as row_number rises)."""
    rows = {(1, 30, 0): 2, (1, 10, 1): 1}
    w = T.window(
        order_by=[desc("y"), "x"],
        frames={"nxt": rows_between(1, 1)},
        nxt=sum_(col("y")),
        rn=row_number(),
    )
    assert run(w, rows) == Counter(
        {(1, 30, 0, 30, 1): 1, (1, 30, 0, 10, 2): 1, (1, 10, 1, None, 3): 1}
    )


# --- reference semantics ---------------------------------------------------------------------


def test_rank_dense_rank_row_number_with_peers_and_duplicates() -> None:
    # y = 1, 1, 2 (the first row twice): rank 1,1,3 and dense_rank 1,1,2 within partition 7
    rows = {(7, 1, 10): 2, (7, 2, 30): 1, (8, None, 5): 1, (8, 3, 6): 1}
    w = T.window(["p"], order_by=["y"], rn=row_number(), r=rank(), dr=dense_rank())
    assert run(w, rows) == Counter(
        {
            (7, 1, 10, 1, 1, 1): 1,
            (7, 1, 10, 2, 1, 1): 1,
            (7, 2, 30, 3, 3, 2): 1,
            (8, 3, 6, 1, 1, 1): 1,  # ascending: NULLs last
            (8, None, 5, 2, 2, 2): 1,
        }
    )


def test_ties_are_broken_by_the_whole_row() -> None:
    rows = {(1, 5, 3): 1, (1, 5, 1): 1, (1, 5, None): 1, (1, 4, 9): 1}
    w = T.window(["p"], order_by=[desc("y")], rn=row_number(), prev=lag(col("x")))
    assert run(w, rows) == Counter(
        {
            (1, 5, 1, 1, None): 1,
            (1, 5, 3, 2, 1): 1,
            (1, 5, None, 3, 3): 1,
            (1, 4, 9, 4, None): 1,
        }
    )


def test_aggregate_frames_include_peers_or_the_whole_partition() -> None:
    rows = {(0, 1, 1): 1, (0, 1, 2): 1, (0, 2, 3): 1}  # (x, y) = (1,1), (2,1), (3,2)
    running = T.window(order_by=["y"], s=sum_(col("x")), n=count(), a=avg(col("x")))
    assert run(running, rows) == Counter(
        {(0, 1, 1, 3, 2, 1.5): 1, (0, 1, 2, 3, 2, 1.5): 1, (0, 2, 3, 6, 3, 2.0): 1}
    )
    whole = T.window(["p"], s=sum_(col("x")), lo=min_(col("x")), r=rank())
    assert run(whole, rows) == Counter(
        {(0, 1, 1, 6, 1, 1): 1, (0, 1, 2, 6, 1, 1): 1, (0, 2, 3, 6, 1, 1): 1}
    )
    nulls = T.window(order_by=["y"], s=sum_(col("x")), c=count(col("x")))
    assert run(nulls, {(0, 1, None): 1, (0, 2, 4): 1}) == Counter(
        {(0, 1, None, None, 0): 1, (0, 2, 4, 4, 1): 1}
    )


def test_lag_and_lead_offsets_and_defaults() -> None:
    rows = {(0, 1, 10): 1, (0, 2, 20): 1, (0, 3, 30): 1}
    w = T.window(
        order_by=["y"],
        a=lag(col("x")),
        b=lag(col("x"), 1, 0),
        c=lead(col("x"), 2, col("y") * -1),  # the default is evaluated on the current row
        d=lag(col("x"), -1),  # lead by one
        e=lead(col("x"), 0),
    )
    assert run(w, rows) == Counter(
        {
            (0, 1, 10, None, 0, 30, 20, 10): 1,
            (0, 2, 20, 10, 10, -2, 30, 20): 1,
            (0, 3, 30, 20, 20, -3, None, 30): 1,
        }
    )


def test_value_and_distribution_functions() -> None:
    # (y, x): (1, 10), (1, 20), (2, 30), (3, 40) in one partition, ordered by y
    rows = {(0, 1, 10): 1, (0, 1, 20): 1, (0, 2, 30): 1, (0, 3, 40): 1}
    w = T.window(
        order_by=["y"],
        fv=first_value(col("x")),
        lv=last_value(col("x")),  # the row's last peer
        nv=nth_value(col("x"), 3),  # NULL until the frame holds 3 rows
        nt=ntile(3),
        pr=percent_rank(),
        cd=cume_dist(),
    )
    assert w.desc.columns[5].nullable and not w.desc.columns[6].nullable
    assert [str(c.type) for c in w.desc.columns[3:]] == ["int64"] * 4 + ["float64"] * 2
    assert run(w, rows) == Counter(
        {
            (0, 1, 10, 10, 20, None, 1, 0.0, 0.5): 1,
            (0, 1, 20, 10, 20, None, 1, 0.0, 0.5): 1,
            (0, 2, 30, 10, 30, 30, 2, 2 / 3, 0.75): 1,
            (0, 3, 40, 10, 40, 30, 3, 1.0, 1.0): 1,
        }
    )
    alone = T.window(["p"], pr=percent_rank(), cd=cume_dist(), lv=last_value(col("x")))
    assert run(alone, {(0, 1, 10): 1, (0, 2, 5): 1}) == Counter(
        # all peers: the last row is the last by the whole row, (0, 2, 5)
        {(0, 1, 10, 0.0, 1.0, 5): 1, (0, 2, 5, 0.0, 1.0, 5): 1}
    )
    assert "nth_value(x, 3), nt = ntile(3)" in w.explain()


def test_text_partitions_and_negative_input_fails() -> None:
    desc_ = RelationDesc.of(("k", TEXT, True), ("v", FLOAT64, True))
    g = Get(T_ID, desc_)
    w = g.window(["k"], order_by=[desc("v")], rn=row_number())
    got = evaluate(w, {T_ID: {("a", 1.0): 1, ("a", float("nan")): 1, (None, 2.0): 1}}, 0)
    # NaN is the largest float: first in descending order
    assert got == Counter({("a", NAN, 1): 1, ("a", 1.0, 2): 1, (None, 2.0, 1): 1})
    from spate.plan.errors import EvalError

    with pytest.raises(EvalError, match="Window: input row"):
        evaluate(w, {T_ID: {("a", 1.0): -1}}, 0)
