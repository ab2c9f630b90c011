"""The physical format of a collection in Spark: data columns, then ``_time`` and ``_diff`` (long).

Importing this module imports PySpark's type classes but never starts a JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import ScalarKind, ScalarType

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


def spark_type(t: ScalarType) -> DataType:
    from pyspark.sql import types as st

    match t.kind:
        case ScalarKind.BOOL:
            return st.BooleanType()
        case ScalarKind.INT64:
            return st.LongType()
        case ScalarKind.FLOAT64:
            return st.DoubleType()
        case ScalarKind.NUMERIC:
            assert t.precision is not None and t.scale is not None
            return st.DecimalType(t.precision, t.scale)
        case ScalarKind.TEXT | ScalarKind.JSONB | ScalarKind.INTERVAL:
            return st.StringType()  # an interval as stored: spate.repr.interval.encode
        case ScalarKind.BYTES:
            return st.BinaryType()
        case ScalarKind.DATE:
            return st.DateType()
        case ScalarKind.TIMESTAMP:
            return st.TimestampNTZType()
    raise AssertionError(f"unhandled scalar kind {t.kind}")


def data_struct(desc: RelationDesc) -> StructType:
    from pyspark.sql import types as st

    return st.StructType(
        [st.StructField(c.name, spark_type(c.type), c.nullable) for c in desc.columns]
    )


def updates_struct(desc: RelationDesc) -> StructType:
    from pyspark.sql import types as st

    fields = list(data_struct(desc).fields)
    fields.append(st.StructField(TIME_COLUMN, st.LongType(), False))
    fields.append(st.StructField(DIFF_COLUMN, st.LongType(), False))
    return st.StructType(fields)
