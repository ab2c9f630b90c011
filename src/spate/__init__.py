"""spate: views over changing data, kept correct and fresh, with Spark doing the work.

What a user touches is here: :class:`Environment` (open one on a data directory), the column
types and :class:`RelationDesc` to describe tables, and the plan builder's functions to define
views. Sources and sinks are described with :mod:`spate.sources` and :mod:`spate.sinks`; every
error the API raises is in :mod:`spate.errors`.

Example::

    import spate
    from spate import INT64, TEXT, RelationDesc, col, count, max_

    with spate.Environment.open("spate-data") as env:
        env.create_cluster("c", replicas=2)
        bids = RelationDesc.of(("auction", INT64, False), ("price", INT64, False), ("who", TEXT))
        env.create_table("bids", bids)
        env.insert("bids", [(1, 10, "ann"), (1, 25, "bo")])
        best = env.get("bids").reduce(["auction"], top=max_(col("price")), n=count())
        env.create_materialized_view("best", best, cluster="c")
        print(env.select("best"))

The names are imported on first use, so that ``import spate`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from spate._version import __version__ as __version__

if TYPE_CHECKING:
    from spate.environment.api import Environment
    from spate.environment.reads import Isolation
    from spate.environment.write_result import WriteResult
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
    from spate.plan.relation import RelationExpr
    from spate.plan.window import dense_rank, lag, lead, rank, row_number
    from spate.repr.desc import Column, RelationDesc
    from spate.repr.types import (
        BOOL,
        BYTES,
        DATE,
        FLOAT64,
        INT64,
        JSONB,
        TEXT,
        TIMESTAMP,
        ScalarType,
        numeric,
    )

_HOME: Final[dict[str, str]] = {
    "Environment": "spate.environment.api",
    "Isolation": "spate.environment.reads",
    "WriteResult": "spate.environment.write_result",
    "RelationExpr": "spate.plan.relation",
    "Column": "spate.repr.desc",
    "RelationDesc": "spate.repr.desc",
    **dict.fromkeys(
        ("BOOL", "BYTES", "DATE", "FLOAT64", "INT64", "JSONB", "TEXT", "TIMESTAMP"),
        "spate.repr.types",
    ),
    "ScalarType": "spate.repr.types",
    "numeric": "spate.repr.types",
    **dict.fromkeys(
        (
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
            "timestamp",
        ),
        "spate.plan.builder",
    ),
    **dict.fromkeys(("dense_rank", "lag", "lead", "rank", "row_number"), "spate.plan.window"),
}

__all__ = [
    "BOOL",
    "BYTES",
    "DATE",
    "FLOAT64",
    "INT64",
    "JSONB",
    "TEXT",
    "TIMESTAMP",
    "Column",
    "Environment",
    "Isolation",
    "RelationDesc",
    "RelationExpr",
    "ScalarType",
    "WriteResult",
    "__version__",
    "asc",
    "avg",
    "bool_and",
    "bool_or",
    "case",
    "coalesce",
    "col",
    "count",
    "dense_rank",
    "desc",
    "from_epoch_ms",
    "greatest",
    "interval",
    "lag",
    "lead",
    "least",
    "lit",
    "max_",
    "min_",
    "now",
    "now_ms",
    "numeric",
    "rank",
    "row_number",
    "string_agg",
    "sum_",
    "timestamp",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'spate' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
