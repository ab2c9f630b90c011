"""The internal layout of collections inside a dataflow: positional columns ``c0 … cN-1``.

Plans address columns by position, and names inside a plan may repeat or change from node to
node, so every DataFrame, Arrow table and Parquet batch inside :mod:`spate.render` names its data
columns by position (:func:`col_name`), followed by ``_time`` and ``_diff`` (int64). Names from a
:class:`~spate.repr.desc.RelationDesc` appear only at the edges: inputs are renamed on the way in
(:func:`to_internal`), exports on the way out (:func:`to_external`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import pyarrow as pa

from spate.repr.arrow import arrow_type, updates_schema
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.spark import spark_type

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column
    from pyspark.sql.types import StructType

    from spate.plan.finishing import ColumnOrder


def col_name(i: int) -> str:
    """The internal name of the column at position ``i``."""
    return f"c{i}"


def data_names(arity: int) -> list[str]:
    return [col_name(i) for i in range(arity)]


def sort_columns(order_by: Sequence[ColumnOrder]) -> list[Column]:
    """``order_by`` as Spark sort columns over the internal layout, NULLs placed explicitly."""
    from pyspark.sql import functions as F

    order: list[Column] = []
    for o in order_by:
        c = F.col(col_name(o.column))
        last = o.effective_nulls_last()
        if o.desc:
            order.append(c.desc_nulls_last() if last else c.desc_nulls_first())
        else:
            order.append(c.asc_nulls_last() if last else c.asc_nulls_first())
    return order


@functools.lru_cache(maxsize=1024)
def internal_schema(desc: RelationDesc) -> pa.Schema:
    """Positional data columns (types of ``desc``), then ``_time`` and ``_diff`` (cached: a
    step asks for the same few schemas dozens of times, ~90 µs each to build)."""
    fields = [pa.field(col_name(i), arrow_type(c.type)) for i, c in enumerate(desc.columns)]
    fields.append(pa.field(TIME_COLUMN, pa.int64(), nullable=False))
    fields.append(pa.field(DIFF_COLUMN, pa.int64(), nullable=False))
    return pa.schema(fields)


def internal_struct(desc: RelationDesc) -> StructType:
    """:func:`internal_schema` as a Spark schema."""
    from pyspark.sql import types as st

    fields = [
        st.StructField(col_name(i), spark_type(c.type), True) for i, c in enumerate(desc.columns)
    ]
    fields.append(st.StructField(TIME_COLUMN, st.LongType(), False))
    fields.append(st.StructField(DIFF_COLUMN, st.LongType(), False))
    return st.StructType(fields)


def to_internal(table: pa.Table, desc: RelationDesc) -> pa.Table:
    """An updates table in the external layout (``desc``'s names) renamed and cast to the
    internal one. Columns are taken by position: data columns, then ``_time``, ``_diff``."""
    schema = internal_schema(desc)
    if table.num_columns != len(schema):
        raise ValueError(
            f"expected {len(schema)} columns ({desc.arity} data, _time, _diff), got "
            f"{table.num_columns}: {table.column_names}"
        )
    arrays = [table.column(i).cast(schema.field(i).type) for i in range(table.num_columns)]
    return pa.Table.from_arrays(arrays, schema=schema)


def to_external(table: pa.Table, desc: RelationDesc) -> pa.Table:
    """An updates table in the internal layout, with ``desc``'s names and schema."""
    schema = updates_schema(desc)
    if table.num_columns != len(schema):
        raise ValueError(
            f"expected {len(schema)} columns ({desc.arity} data, _time, _diff), got "
            f"{table.num_columns}: {table.column_names}"
        )
    arrays = [table.column(i).cast(schema.field(i).type) for i in range(table.num_columns)]
    return pa.Table.from_arrays(arrays, schema=schema)
