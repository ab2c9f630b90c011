"""Binding Spark column values once inside an expression."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F


def let(body: Callable[..., Column], **values: Column) -> Column:
    """``body`` of ``values`` (in order) with each value computed once: a lambda over a
    one-element array. Passing a Column itself copies its whole tree into every use, which
    makes nested expressions too large for Catalyst (``interval * float8`` grew to 450 kB of
    expression text and exhausted the driver's heap)."""
    row = F.struct(*(v.alias(k) for k, v in values.items()))
    return F.transform(F.array(row), lambda r: body(*(r[k] for k in values))).getItem(0)
