"""Plan templates: a step's Spark plan built once and run again by every later step.

Building a DataFrame in PySpark analyses it: Catalyst resolves the plan anew at every
``join``, ``select`` or ``groupBy``, and a step's plan was rebuilt — identical to the previous
step's but for its inputs' contents — at every step (a few hundred milliseconds of a 1k-update
step on the Spark path, about half of it). So an operator's Spark path reads its step inputs
through **slots** (:meth:`PlanTemplates.slot`): one fixed Parquet directory per operator input,
whose one file is replaced at each step, read by a DataFrame made once, whose file listing is
refreshed when the file changes. A DataFrame built from slots and other templates only is a
**template** (:meth:`PlanTemplates.template`): under the same key and the same inputs it is
the same plan at every step, so it is built and analysed once. Each run of a template is a
fresh execution of its analysed plan (:meth:`PlanTemplates.runnable`): Spark optimises and
plans it anew, reading the slots' current files, but does not analyse it again.

Obligations of the callers: a template's key MUST name everything its build depends on other
than its inputs (the operator, the flags that shape the plan); a slot is written at most once
per step, and MUST NOT be written again before the plans that read it in that step have run
(operators write their slots while building the step's plan, and the dataflow runs that plan
before the next operator's step). Without the PySpark internals this needs (a classic
DataFrame and Spark's ``Dataset.ofRows``), slots are plain DataFrames and nothing is reused.
"""

from __future__ import annotations

import itertools
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass
class _Slot:
    dir: Path
    df: DataFrame
    index: Any
    """The JVM file index of ``df``'s relation (refreshed when the file changes)."""
    files: list[Path] = field(default_factory=list)


class PlanTemplates:
    """One dataflow's slots and templates (module docs)."""

    def __init__(
        self, spark: SparkSession, root: Path, write: Callable[[pa.Table, Path], None]
    ) -> None:
        """``write``: how a slot's table is written as Parquet."""
        self._spark = spark
        self._write = write
        self._root = root
        self._ids = itertools.count()
        self._slots: dict[tuple[str, pa.Schema], _Slot] = {}
        self._built: dict[tuple[object, ...], DataFrame] = {}
        self._stable: dict[int, DataFrame] = {}
        """Slots' and templates' DataFrames by ``id`` (held, so that an id is never reused)."""
        self._of_rows: Any = _of_rows(spark)
        self.builds = 0
        """Templates built so far (a template reused costs none)."""

    @property
    def enabled(self) -> bool:
        return self._of_rows is not None

    def slot(
        self, name: str, table: pa.Table, schema: StructType | None = None
    ) -> DataFrame | None:
        """The DataFrame of slot ``name`` now holding ``table`` (read with ``schema``, default
        the table's own), the same DataFrame at every step for the same name and table
        schema; ``None`` when templates are not available here."""
        if self._of_rows is None:
            return None
        key = (name, table.schema)
        slot = self._slots.get(key)
        if slot is None:
            # never a path used before, by any engine of this session: Spark caches the
            # listings of directories it has read (a restarted dataflow reuses its scratch)
            directory = self._root / f"slot-{uuid.uuid4().hex}"
            directory.mkdir(parents=True)
            path = directory / f"p-{next(self._ids):06d}.parquet"
            self._write(table, path)
            reader = self._spark.read if schema is None else self._spark.read.schema(schema)
            df = reader.parquet(str(directory))
            index = _file_index(df)
            if index is None:
                shutil.rmtree(directory, ignore_errors=True)
                return None
            slot = self._slots[key] = _Slot(directory, df, index, [path])
            self._hold(df)
            return df
        path = slot.dir / f"p-{next(self._ids):06d}.parquet"
        self._write(table, path)
        for old in slot.files:
            old.unlink(missing_ok=True)
        slot.files = [path]
        slot.index.refresh()
        return slot.df

    def is_stable(self, df: DataFrame) -> bool:
        """``df`` is a slot's or a template's DataFrame."""
        return self._stable.get(id(df)) is df

    def template(
        self, key: tuple[object, ...], inputs: Sequence[DataFrame], build: Callable[[], DataFrame]
    ) -> DataFrame:
        """``build()``, built once for ``key`` when every one of ``inputs`` (what ``build``
        reads) is a slot or a template; else built anew (not a template)."""
        if not inputs or not all(self.is_stable(i) for i in inputs):
            return build()
        full = (key, *(id(i) for i in inputs))
        df = self._built.get(full)
        if df is None:
            df = self._built[full] = build()
            self._hold(df)
            self.builds += 1
        return df

    def _hold(self, df: DataFrame) -> None:
        self._stable[id(df)] = df
        internals: Any = df
        internals._spate_templates = self

    def runnable(self, df: DataFrame) -> DataFrame:
        """What to run for ``df``: for a template, a fresh execution of its analysed plan
        (which reads the slots' current files); else ``df`` itself."""
        if self._of_rows is None or not self.is_stable(df):
            return df
        from pyspark.sql import DataFrame

        internals: Any = df
        analysed = internals._jdf.queryExecution().analyzed()
        session: Any = self._spark
        return DataFrame(self._of_rows(session._jsparkSession, analysed), self._spark)


def templates_of(df: DataFrame) -> PlanTemplates | None:
    """The templates ``df`` is a slot or template of (``None``: neither), so that code
    without the engine at hand (:class:`~spate.render.operators.node.ColumnMemo`) can
    reuse plans built over it."""
    templates = getattr(df, "_spate_templates", None)
    if isinstance(templates, PlanTemplates) and templates.is_stable(df):
        return templates
    return None


def _of_rows(spark: SparkSession) -> Any:
    """Spark's ``Dataset.ofRows`` (a DataFrame of an analysed plan), ``None`` if missing."""
    session: Any = spark
    jvm = getattr(session, "_jvm", None)
    if jvm is None or getattr(session, "_jsparkSession", None) is None:
        return None  # not a classic (py4j) session
    for cls in ("org.apache.spark.sql.classic.Dataset", "org.apache.spark.sql.Dataset"):
        holder = jvm
        for part in cls.split("."):
            holder = getattr(holder, part)
        if type(holder).__name__ == "JavaClass":  # (else py4j answers a package)
            return holder.ofRows
    return None


def _file_index(df: DataFrame) -> Any:
    """The file index of the relation ``df`` reads, ``None`` if it cannot be reached."""
    try:
        internals: Any = df
        return internals._jdf.queryExecution().analyzed().relation().location()
    except Exception:  # py4j: not a plain file relation here
        return None
