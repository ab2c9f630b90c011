"""The plan IR: scalar expressions, relational expressions and dataflow descriptions.

The IR is the contract between whoever defines views (the Python builder API now, SQL later) and
the replicas that run them. Every node is immutable, validated at construction, and encodable by
:mod:`spate.codec`.

* :mod:`spate.plan.expr` — scalar expression nodes; :mod:`spate.plan.infer` — name resolution
  and types; :mod:`spate.plan.aggregate` — aggregate functions.
* :mod:`spate.plan.relation` — relational nodes and their fluent methods;
  :mod:`spate.plan.builder` — the functions a plan is written with (``col``, ``lit``, ``count``…);
  below them :mod:`spate.plan.typing_rules` (each node's output schema),
  :mod:`spate.plan.arguments` (user arguments normalised to the IR) and
  :mod:`spate.plan.explain` (plan text).
* :mod:`spate.plan.window` — ``Window`` and its functions (row_number, rank, lag, …; defined in
  :mod:`spate.plan.window_func`).
* :mod:`spate.plan.recursive` — ``Recursive`` (``WITH RECURSIVE``) and its working table.
* :mod:`spate.plan.temporal` — validity intervals of temporal filters.
* :mod:`spate.plan.evaluation` — what a plan means, evaluated in plain Python.
* :mod:`spate.plan.dataflow` — ``DataflowDescription``; :mod:`spate.plan.validate` — its checks.
"""

from __future__ import annotations

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.builder import (
    asc,
    avg,
    bool_and,
    bool_or,
    case,
    coalesce,
    col,
    count,
    desc,
    from_epoch_ms,
    greatest,
    interval,
    least,
    lit,
    max_,
    min_,
    now,
    now_ms,
    string_agg,
    sum_,
    timestamp,
)
from spate.plan.errors import (
    EvalError,
    InvalidDataflow,
    InvalidPlan,
    PlanColumnMissing,
    PlanTypeError,
)
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    ColumnType,
    DateTrunc,
    Extract,
    Literal,
    Now,
    RaiseError,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
)
from spate.plan.recursive import Recursive, RecursiveRef
from spate.plan.relation import (
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    FlatMap,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from spate.plan.table_func import TableFunc
from spate.plan.temporal import TemporalBounds, temporal_bounds
from spate.plan.window import (
    Window,
    WindowExpr,
    WindowFrame,
    WindowFunc,
    cume_dist,
    dense_rank,
    first_value,
    lag,
    last_value,
    lead,
    nth_value,
    ntile,
    percent_rank,
    range_between,
    rank,
    row_number,
    rows_between,
)

__all__ = [
    "AggregateExpr",
    "AggregateFunc",
    "ArrangeBy",
    "BinaryFunc",
    "CallBinary",
    "CallUnary",
    "CallVariadic",
    "Case",
    "Cast",
    "ColumnRef",
    "ColumnType",
    "Constant",
    "DateTrunc",
    "Distinct",
    "EvalError",
    "Extract",
    "Filter",
    "FlatMap",
    "Get",
    "InvalidDataflow",
    "InvalidPlan",
    "Join",
    "Literal",
    "Map",
    "Negate",
    "Now",
    "PlanColumnMissing",
    "PlanTypeError",
    "Project",
    "RaiseError",
    "Recursive",
    "RecursiveRef",
    "Reduce",
    "RelationExpr",
    "ScalarExpr",
    "TableFunc",
    "TemporalBounds",
    "Threshold",
    "TimeUnit",
    "TopK",
    "UnaryFunc",
    "Union",
    "VariadicFunc",
    "Window",
    "WindowExpr",
    "WindowFrame",
    "WindowFunc",
    "asc",
    "avg",
    "bool_and",
    "bool_or",
    "case",
    "coalesce",
    "col",
    "count",
    "cume_dist",
    "dense_rank",
    "desc",
    "first_value",
    "from_epoch_ms",
    "greatest",
    "interval",
    "lag",
    "last_value",
    "lead",
    "least",
    "lit",
    "max_",
    "min_",
    "now",
    "now_ms",
    "nth_value",
    "ntile",
    "percent_rank",
    "range_between",
    "rank",
    "row_number",
    "rows_between",
    "string_agg",
    "sum_",
    "temporal_bounds",
    "timestamp",
]
