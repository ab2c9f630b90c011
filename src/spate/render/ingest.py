"""Small Arrow tables into Spark in two py4j calls.

``SparkSession.createDataFrame(arrow_table)`` costs about 20 py4j round trips (session
settings read anew, the JVM utility class looked up by reflection, the temporary file's
reader resolved…), ~12 ms a call here, and a small step builds four of them. The settings it
reads are fixed for the session's life, so :class:`ArrowIngest` reads them once and keeps the
resolved JVM methods; each table then costs writing one Arrow stream file and two calls
(read the file into the JVM, make the DataFrame). The conversion on the Python side is
PySpark's own (the same type casts and timestamp localisation), so the DataFrame is the one
``createDataFrame`` would build.

It uses PySpark internals (``PythonSQLUtils``), pinned with PySpark's version. Should they
be missing, :func:`arrow_ingest` returns ``None`` and the caller uses ``createDataFrame``.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


class ArrowIngest:
    """``createDataFrame`` of an Arrow table with a Spark schema, minus the repeated lookups."""

    def __init__(self, spark: SparkSession) -> None:
        from pyspark.sql.utils import is_timestamp_ntz_preferred

        self._spark = spark
        internals: Any = spark  # private PySpark attributes (module docs)
        jconf = internals._jconf
        utils = internals._jvm.PythonSQLUtils
        self._timezone = str(jconf.sessionLocalTimeZone())
        self._large = bool(jconf.arrowUseLargeVarTypes())
        self._chunk = int(jconf.arrowMaxRecordsPerBatch())
        self._read = utils.readArrowStreamFromFile
        self._to_df = utils.toDataFrame
        self._jsession = internals._jsparkSession
        self._dir = internals.sparkContext._temp_dir
        self._schemas: dict[StructType, tuple[str, pa.Schema]] = {}
        self._structs: dict[pa.Schema, StructType] = {}
        self._prefer_ntz = bool(is_timestamp_ntz_preferred())

    def struct_of(self, schema: pa.Schema) -> StructType:
        """The Spark schema ``createDataFrame`` gives an Arrow table of ``schema``."""
        struct = self._structs.get(schema)
        if struct is None:
            from pyspark.sql.pandas.types import from_arrow_type
            from pyspark.sql.types import StructField, StructType

            struct = self._structs[schema] = StructType(
                [
                    StructField(f.name, from_arrow_type(f.type, self._prefer_ntz), f.nullable)
                    for f in schema
                ]
            )
        return struct

    def frame(self, table: pa.Table, schema: StructType | None = None) -> DataFrame:
        """The DataFrame of ``table`` read with ``schema`` (default: as ``createDataFrame``
        would type it)."""
        from pyspark.sql.dataframe import DataFrame
        from pyspark.sql.pandas.types import (
            _check_arrow_table_timestamps_localize,
            to_arrow_schema,
        )

        if schema is None:
            schema = self.struct_of(table.schema)
        known = self._schemas.get(schema)
        if known is None:
            arrow_schema = to_arrow_schema(
                schema,
                error_on_duplicated_field_names_in_struct=True,
                prefers_large_types=self._large,
            )
            known = self._schemas[schema] = (schema.json(), arrow_schema)
        schema_json, arrow_schema = known
        table = _check_arrow_table_timestamps_localize(table, schema, True, self._timezone)
        table = table.cast(arrow_schema)
        fd, path = tempfile.mkstemp(dir=self._dir, suffix=".arrows")
        try:
            with os.fdopen(fd, "wb") as sink, pa.ipc.new_stream(sink, arrow_schema) as writer:
                for batch in table.to_batches(max_chunksize=self._chunk):
                    if batch.num_rows:  # Spark stops reading at an empty batch
                        writer.write_batch(batch)
            jiter = self._read(path)  # read eagerly: the file may go right after
        finally:
            os.unlink(path)
        df: Any = DataFrame(self._to_df(jiter, schema_json, self._jsession), self._spark)
        df._schema = schema  # as createDataFrame does
        return cast("DataFrame", df)


def without_empty_batches(table: pa.Table) -> pa.Table:
    """``table`` without its empty record batches. Spark's readers of an Arrow stream (this
    module's and ``createDataFrame``'s) stop at the first empty batch and silently drop the
    rows after it; a table whose columns are chunked differently (a concatenation, a
    consolidation) splits into batches that can be empty."""
    batches = table.to_batches()
    if all(b.num_rows for b in batches):
        return table
    return pa.Table.from_batches([b for b in batches if b.num_rows], table.schema)


def arrow_ingest(spark: SparkSession) -> ArrowIngest | None:
    """An :class:`ArrowIngest` for ``spark``, ``None`` when this PySpark lacks the internals
    it needs (or encrypts local I/O, where the file path is not taken)."""
    try:
        context: Any = spark.sparkContext
        if context._encryption_enabled:
            return None
        return ArrowIngest(spark)
    except (AttributeError, ImportError, TypeError):
        return None
    except Exception as e:  # py4j: the JVM method does not exist in this Spark
        if type(e).__module__.startswith("py4j"):
            return None
        raise
