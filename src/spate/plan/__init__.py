"""The plan IR: scalar expressions, relational expressions and dataflow descriptions.

The IR is the contract between whoever defines views (the Python builder API now, SQL later) and
the replicas that run them. Every node is immutable, validated at construction, and encodable by
:mod:`spate.protocol.codec`.

* :mod:`spate.plan.expr` — scalar expression nodes; :mod:`spate.plan.infer` — name resolution
  and types; :mod:`spate.plan.aggregate` — aggregate functions.
* :mod:`spate.plan.relation` — relational nodes; :mod:`spate.plan.builder` — the fluent API.
* :mod:`spate.plan.temporal` — validity intervals of temporal filters.
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
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
)
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
    "asc",
    "avg",
    "bool_and",
    "bool_or",
    "case",
    "coalesce",
    "col",
    "count",
    "desc",
    "from_epoch_ms",
    "greatest",
    "interval",
    "least",
    "lit",
    "max_",
    "min_",
    "now",
    "now_ms",
    "string_agg",
    "sum_",
    "temporal_bounds",
    "timestamp",
]
