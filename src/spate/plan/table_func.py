"""Table functions of ``FlatMap``: each input row becomes zero or more rows.

``FlatMap(input, func, exprs)`` appends the one column of ``func(exprs)`` to each input row, once
per value produced, with the input row's multiplicity.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from spate.plan.errors import PlanTypeError
from spate.plan.expr import ColumnType
from spate.repr.types import INT64, TEXT, ScalarKind


class TableFunc(StrEnum):
    GENERATE_SERIES = "generate_series"
    """``(start, stop[, step])`` int64 → the int64s ``start, start+step, … <= stop`` (step > 0;
    ``>= stop`` when step < 0; step 0 or a NULL argument: no rows)."""
    UNNEST = "unnest"
    """``(e1, …, en)`` → one row per argument value, NULLs included, in order."""
    STRING_TO_TABLE = "string_to_table"
    """``(text, delimiter)`` → the pieces of ``text`` split at each ``delimiter``; an empty
    delimiter gives the whole text; a NULL argument or an empty text gives no rows."""


def table_func_type(func: TableFunc, arg_types: Sequence[ColumnType]) -> ColumnType:
    """The type of the one column ``func`` appends (raises ``PlanTypeError``)."""
    kinds = [t.type.kind for t in arg_types]
    shown = ", ".join(str(t.type) for t in arg_types)
    if func is TableFunc.GENERATE_SERIES:
        if len(kinds) not in (2, 3) or any(k is not ScalarKind.INT64 for k in kinds):
            raise PlanTypeError(f"generate_series expects (int64, int64[, int64]), got ({shown})")
        return ColumnType(INT64, False)
    if func is TableFunc.UNNEST:
        if not arg_types:
            raise PlanTypeError("unnest needs at least one value")
        first = arg_types[0].type
        if any(t.type != first for t in arg_types):
            raise PlanTypeError(f"unnest needs values of one type, got ({shown})")
        return ColumnType(first, any(t.nullable for t in arg_types))
    if func is TableFunc.STRING_TO_TABLE:
        if kinds != [ScalarKind.TEXT, ScalarKind.TEXT]:
            raise PlanTypeError(f"string_to_table expects (text, text), got ({shown})")
        return ColumnType(TEXT, False)
    raise PlanTypeError(f"unknown table function {func!r}")
