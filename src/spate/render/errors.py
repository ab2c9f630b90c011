"""Error collections: evaluation errors as data, beside each dataflow's rows.

A row whose expression fails (a :class:`~spate.plan.expr.RaiseError` reached, int64 or numeric
``+ - *`` out of range, a ``sum`` beyond its type) does not stop the dataflow: in capture mode
(see :mod:`spate.render.dataflow`) the operators route it, as an error record
(:func:`spate.errors.error_record`: SQLSTATE, message, expression, the offending row) with the
row's time and multiplicity, to the dataflow's :class:`ErrorCollection`. Because records keep
their multiplicities, retracting the input row retracts its error; a read at ``t`` fails exactly
when the collection is non-empty at ``t``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import Column

    from spate.render.scalar import Failure

_RAISED: Final = re.compile(r"\[SQLSTATE ([0-9A-Z]{5})\]")
"""What follows the message of an error this package raises inside Spark (``raise_error``)."""


def raised_marker(sqlstate: str) -> str:
    """What follows the message of an error raised inside Spark (``F.raise_error``): its
    SQLSTATE, which :func:`raised_sqlstate` reads back from the failed job."""
    return f" [SQLSTATE {sqlstate}]"


def raised_sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of the evaluation error that failed a Spark job (``None``: none did).
    Spark keeps only the text of an error a ``raise_error`` raised, so the code is read from
    :func:`raised_marker`'s mark there, once, where the job fails; from then on it travels as
    data."""
    found = _RAISED.search(str(error))
    return found.group(1) if found is not None else None


ERROR_COLUMN: Final = "_err"
ERROR_SCHEMA: Final = pa.schema(
    [
        pa.field(ERROR_COLUMN, pa.string()),
        pa.field(TIME_COLUMN, pa.int64(), nullable=False),
        pa.field(DIFF_COLUMN, pa.int64(), nullable=False),
    ]
)


def first_failure(failures: Sequence[Failure], row: Column, expression: str) -> Column | None:
    """The error record of the first failure whose condition holds, NULL where none does
    (``None`` when nothing can fail); ``row`` renders the offending row."""
    from pyspark.sql import functions as F

    from spate.errors import error_record

    out: Column | None = None
    for cond, code, message in failures:
        text = F.concat(F.lit(error_record(code, message, expression, "")), row)
        out = F.when(cond, text) if out is None else out.when(cond, text)
    return out


def row_text(desc: RelationDesc, names: Sequence[str] | None = None) -> Column:
    """``(a=1, b=NULL)``: a row of ``desc`` as text, for error messages."""
    from pyspark.sql import functions as F

    from spate.render.layout import col_name

    if names is None:
        names = [col_name(i) for i in range(desc.arity)]
    parts = [
        F.concat(F.lit(f"{c.name}="), F.coalesce(F.col(n).cast("string"), F.lit("NULL")))
        for c, n in zip(desc.columns, names, strict=True)
    ]
    return F.concat(F.lit("("), F.concat_ws(", ", *parts), F.lit(")")) if parts else F.lit("()")


def consolidate_errors(table: pa.Table) -> pa.Table:
    """One row per ``(record, time)``, multiplicities summed, zeros dropped."""
    if table.num_rows == 0:
        return ERROR_SCHEMA.empty_table()
    grouped = table.group_by([ERROR_COLUMN, TIME_COLUMN], use_threads=False).aggregate(
        [(DIFF_COLUMN, "sum")]
    )
    out = pa.table(
        {
            ERROR_COLUMN: grouped.column(ERROR_COLUMN),
            TIME_COLUMN: grouped.column(TIME_COLUMN),
            DIFF_COLUMN: grouped.column(f"{DIFF_COLUMN}_sum"),
        },
        schema=ERROR_SCHEMA,
    )
    return out.filter(pc.not_equal(out.column(DIFF_COLUMN), 0))


class ErrorCollection:
    """A dataflow's error records with their times and multiplicities (module docs)."""

    def __init__(self) -> None:
        self._table = ERROR_SCHEMA.empty_table()

    @property
    def ever(self) -> bool:
        """Records were kept (maybe all retracted since)."""
        return bool(self._table.num_rows > 0)

    def append(self, tables: Sequence[pa.Table]) -> None:
        parts = [t.cast(ERROR_SCHEMA) for t in tables if t.num_rows]
        if parts:
            self._table = consolidate_errors(pa.concat_tables([self._table, *parts]))

    def at(self, t: int) -> list[tuple[str, int]]:
        """The records present at time ``t`` with their counts, in a stable order."""
        if self._table.num_rows == 0:
            return []
        upto = self._table.filter(pc.less_equal(self._table.column(TIME_COLUMN), t))
        if upto.num_rows == 0:
            return []
        grouped = upto.group_by([ERROR_COLUMN], use_threads=False).aggregate([(DIFF_COLUMN, "sum")])
        rows = zip(
            grouped.column(ERROR_COLUMN).to_pylist(),
            grouped.column(f"{DIFF_COLUMN}_sum").to_pylist(),
            strict=True,
        )
        return sorted((str(e), int(n)) for e, n in rows if n)

    def compact(self, since: int) -> None:
        """Times before ``since`` become ``since`` (reads before it are no longer served)."""
        if self._table.num_rows == 0:
            return
        times = self._table.column(TIME_COLUMN)
        advanced = pc.max_element_wise(times, pa.scalar(since, pa.int64()))
        self._table = consolidate_errors(self._table.set_column(1, TIME_COLUMN, advanced))


def with_error_column(desc: RelationDesc) -> RelationDesc:
    """``desc`` and one more (last) column, the error record of the row."""
    from spate.repr.desc import Column as DescColumn
    from spate.repr.types import TEXT

    name = ERROR_COLUMN
    while name in desc.names:
        name += "_"
    return RelationDesc([*desc.columns, DescColumn(name, TEXT, True)])


def split_errors(table: pa.Table, arity: int) -> tuple[pa.Table, pa.Table]:
    """An internal-layout table whose data column ``arity`` is the error record: the rows
    without one (that column dropped) and the error rows (:data:`ERROR_SCHEMA`)."""
    from spate.render.layout import col_name

    err = table.column(col_name(arity))
    ok = table.filter(pc.is_null(err)).remove_column(arity)
    bad = table.filter(pc.is_valid(err))
    errors = pa.table(
        [bad.column(col_name(arity)), bad.column(TIME_COLUMN), bad.column(DIFF_COLUMN)],
        schema=ERROR_SCHEMA,
    )
    return ok, errors
