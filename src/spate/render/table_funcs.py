"""Table functions of ``FlatMap`` as Spark array columns.

:func:`table_func_column` returns, for each input row, an **array** of the values
:func:`spate.testing.reference.table_function` produces for that row, in order. The renderer
appends its elements with ``F.explode`` (never ``explode_outer``: an empty array means no output
rows), keeping the row's ``_time`` and ``_diff``::

    out = df.select(*data_cols, F.explode(table_func_column(func, args)).alias(name), "_time",
                    "_diff")

Spark's own functions raise where the reference produces no rows, so they are guarded:

* ``generate_series(start, stop[, step])`` — ``sequence`` raises for step 0 and for a step that
  points away from ``stop``; both (and any NULL argument) give an empty array here.
* ``unnest(e1, …, en)`` — an array of the arguments, NULLs kept in place.
* ``string_to_table(text, delimiter)`` — split **literally** (the delimiter is quoted as a
  regular expression), keeping empty pieces; an empty text gives no rows, an empty delimiter
  the whole text, a NULL argument no rows.

**Known deviations:** a ``generate_series`` with more elements than a Spark array holds
(about 2**31) raises, where the reference would build the list.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.plan.errors import PlanTypeError
from spate.plan.table_func import TableFunc


def table_func_column(func: TableFunc, args: Sequence[Column]) -> Column:
    """An array column of the values ``func(args)`` produces per row (explode it)."""
    if func is TableFunc.UNNEST:
        if not args:
            raise PlanTypeError("unnest needs at least one value")
        return F.array(*args)
    if func is TableFunc.GENERATE_SERIES:
        if len(args) not in (2, 3):
            raise PlanTypeError(f"generate_series takes 2 or 3 arguments, got {len(args)}")
        return generate_series(*args)
    if func is TableFunc.STRING_TO_TABLE:
        if len(args) != 2:
            raise PlanTypeError(f"string_to_table takes 2 arguments, got {len(args)}")
        return string_to_table(args[0], args[1])
    raise PlanTypeError(f"unknown table function {func!r}")


def generate_series(start: Column, stop: Column, step: Column | None = None) -> Column:
    """``start, start+step, …`` up to ``stop`` inclusive (int64); empty where it cannot move."""
    long = T.LongType()
    step = F.lit(1).cast(long) if step is None else step
    empty = F.array().cast(T.ArrayType(long))
    moves = ((step > F.lit(0)) & (start <= stop)) | ((step < F.lit(0)) & (start >= stop))
    series = F.sequence(start.cast(long), stop.cast(long), step.cast(long))
    return F.when(moves, series).otherwise(empty)


def string_to_table(text: Column, delimiter: Column) -> Column:
    """``text`` split at every occurrence of ``delimiter`` (literally), empty pieces kept."""
    empty = F.array().cast(T.ArrayType(T.StringType()))
    # Pattern.quote: \Q…\E, with each \E inside the delimiter closed and reopened.
    quoted = F.concat(
        F.lit("\\Q"), F.replace(delimiter, F.lit("\\E"), F.lit("\\E\\\\E\\Q")), F.lit("\\E")
    )
    pieces = F.split(text, quoted, -1)
    return (
        F.when(text.isNull() | delimiter.isNull() | (text == F.lit("")), empty)
        .when(delimiter == F.lit(""), F.array(text))
        .otherwise(pieces)
    )
