"""The SparkSession factory: one tuned session per process.

Settings follow PySpark costs measured on a 2-core machine: shuffle partitions and
default parallelism equal to the core count, UI and console progress off, Arrow on (without it
``createDataFrame`` goes through pickled rows and Python workers, ~6x slower), adaptive
execution off at these partition counts, session time zone UTC (spate's timestamps are naive
wall-clock values and must not shift).

A replica process needs its JVM: :func:`exit_when_jvm_dies` makes the process exit as soon as
the JVM is gone (killed, out of memory), so that it is restarted instead of failing every step.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log: Final = logging.getLogger("spate.render.spark")


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


def exit_with(
    proc: subprocess.Popen[bytes], what: str, on_exit: Callable[[int], None], poll_s: float = 0.5
) -> threading.Thread:
    """Watch ``proc`` on a daemon thread; once it has exited, log it and call ``on_exit`` with
    its exit code."""

    def watch() -> None:
        while (code := proc.poll()) is None:
            time.sleep(poll_s)
        _log.error("%s exited (code %s): the process exits to be restarted", what, code)
        on_exit(code)

    thread = threading.Thread(target=watch, name="spate-jvm-watch", daemon=True)
    thread.start()
    return thread


def exit_when_jvm_dies(session: SparkSession, what: str, exit_code: int) -> None:
    """Exit the process with ``exit_code`` as soon as ``session``'s JVM is gone (module docs).
    A session whose JVM this process did not start (none to watch) is left as it is."""
    jvm = getattr(getattr(session.sparkContext, "_gateway", None), "proc", None)
    if not isinstance(jvm, subprocess.Popen):
        return

    def leave(_code: int) -> None:
        sys.stderr.flush()
        os._exit(exit_code)

    exit_with(jvm, f"{what}: its Spark JVM (pid {jvm.pid})", leave)
