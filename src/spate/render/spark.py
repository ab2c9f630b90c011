"""The SparkSession factory: one tuned session per process.

Settings follow PySpark costs measured on a 2-core machine: shuffle partitions and
default parallelism equal to the core count, UI and console progress off, Arrow on (without it
``createDataFrame`` goes through pickled rows and Python workers, ~6x slower), adaptive
execution off at these partition counts, session time zone UTC (spate's timestamps are naive
wall-clock values and must not shift).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _cores(master: str) -> int:
    m = re.fullmatch(r"local\[(\d+)(?:,\d+)?\]", master)
    if m:
        return max(1, int(m.group(1)))
    return os.cpu_count() or 2


def spark_conf(
    master: str = "local[2]",
    *,
    app_name: str = "spate",
    driver_memory: str = "2g",
    shuffle_partitions: int | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The configuration spate runs Spark with (``extra`` overrides)."""
    parts = shuffle_partitions or _cores(master)
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": str(parts),
        "spark.default.parallelism": str(parts),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.parquet.inferTimestampNTZ.enabled": "true",
        # numeric arithmetic keeps the scale the plan's types say (spate.render.scalar)
        "spark.sql.decimalOperations.allowPrecisionLoss": "false",
        # A step runs its small deltas in one partition (coalesce(1)) so that joins and
        # groupings need no shuffle; the planner shuffles anyway when a single partition's
        # estimated size passes this, and its estimate of a join (no statistics: the product
        # of the inputs' sizes) passes any bound. The renderer decides from real row counts.
        "spark.sql.maxSinglePartitionBytes": str(1 << 62),
    }
    if extra:
        conf.update(extra)
    return conf


def create_session(
    master: str = "local[2]",
    *,
    app_name: str = "spate",
    driver_memory: str = "2g",
    shuffle_partitions: int | None = None,
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or return the running) SparkSession of this process, tuned for spate."""
    from pyspark.sql import SparkSession

    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        # Python UDFs (numeric sqrt, exp, ln, log, power: spate.render.scalar_funcs) run in
        # this interpreter, which has spate and its dependencies (PySpark reads the variable)
        os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder
    conf = spark_conf(
        master,
        app_name=app_name,
        driver_memory=driver_memory,
        shuffle_partitions=shuffle_partitions,
        extra=extra,
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
