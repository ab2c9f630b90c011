"""The node interface and the per-step context shared by the operators."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import pyarrow as pa

from spate.ids import GlobalId
from spate.render.batch import Batch, Engine, Lazy
from spate.render.templates import templates_of
from spate.repr.desc import RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from spate.plan.expr import ScalarExpr


class StepCanceled(Exception):
    """A step stopped because its dataflow is being dropped (:attr:`StepContext.canceled`)."""


@dataclass
class StepContext:
    """One step: the interval ``[lo, hi)`` and the imports' and built objects' deltas."""

    engine: Engine
    lo: int
    hi: int
    first: bool
    """The hydration step: ``lo`` is the as_of and every arrangement starts empty."""
    collections: dict[GlobalId, Batch]
    commits: list[Callable[[], None]] = field(default_factory=list)
    capture: bool = False
    """Capture mode: rows whose expressions fail go to ``errors`` instead of failing the step
    (:mod:`spate.render.errors`)."""
    errors: list[pa.Table] = field(default_factory=list)
    """Error records of this step (:data:`spate.render.errors.ERROR_SCHEMA`)."""
    canceled: Callable[[], bool] = lambda: False
    """Whether the dataflow is being dropped: an operator that loops on the driver (a
    recursion's rounds) stops at its next round (:class:`StepCanceled`)."""

    def on_commit(self, action: Callable[[], None]) -> None:
        self.commits.append(action)

    def materialize(self, lazy: Lazy, desc: RelationDesc, *, consolidated: bool = True) -> Batch:
        return self.engine.materialize(lazy, desc, consolidated=consolidated)

    def split_errors(self, lazy: Lazy, desc: RelationDesc) -> Lazy:
        """``lazy`` has one more data column than ``desc``, the error record (NULL for a good
        row): computed once, its error rows kept in ``errors``, the others returned.

        Error rows at times before ``lo`` are dropped: they are history a keyed operator reads
        again (the old join of its touched groups), whose errors earlier steps recorded."""
        import pyarrow.compute as pc

        from spate.render.errors import split_errors, with_error_column
        from spate.repr.desc import TIME_COLUMN

        if lazy.is_empty:
            return lazy
        batch = self.materialize(lazy, with_error_column(desc))
        ok, errors = split_errors(batch.arrow(), desc.arity)
        self.errors.append(errors.filter(pc.greater_equal(errors.column(TIME_COLUMN), self.lo)))
        return self.engine.lazy_of_batch(self.engine.batch_of_table(ok, desc))


_T = TypeVar("_T")


class ColumnMemo:
    """Column expressions an operator builds once and reuses at every step.

    Building a Column costs py4j round trips (a 1k-update step spent ~0.2 s on them); an
    unresolved expression (``F.col`` by name, no DataFrame attached) serves any step's
    DataFrames, so only the DataFrames are built anew — and not even those when the input is
    a slot or a plan template (:mod:`spate.render.templates`): the DataFrame a ``select``,
    ``group_agg`` or ``frame`` builds over it is then a template too, built once.
    """

    def __init__(self) -> None:
        self._built: dict[str, object] = {}

    def get(self, name: str, build: Callable[[], _T]) -> _T:
        if name not in self._built:
            self._built[name] = build()
        return cast("_T", self._built[name])

    # A column list goes to the JVM as a Scala Seq, which py4j builds one element per round
    # trip: a select of n columns costs n + 2 calls. The Seq, kept here, costs one (the select).

    def _seq(self, name: str, build: Callable[[], Sequence[Column]]) -> Any:
        def make() -> Any:
            from pyspark import SparkContext

            sc = SparkContext._active_spark_context
            assert sc is not None and sc._jvm is not None
            return sc._jvm.PythonUtils.toSeq([c._jc for c in build()])

        return self.get(f"seq:{name}", make)

    def frame(self, df: DataFrame, name: str, build: Callable[[DataFrame], DataFrame]) -> DataFrame:
        """``build(df)``, a plan template over ``df`` when ``df`` is one (class docs)."""
        templates = templates_of(df)
        if templates is None:
            return build(df)
        return templates.template((self, name), [df], lambda: build(df))

    def select(self, df: DataFrame, name: str, build: Callable[[], Sequence[Column]]) -> DataFrame:
        """``df.select(*build())``, the columns built (and sent to the JVM) once."""
        return self.frame(df, f"select:{name}", lambda d: self._select(d, name, build))

    def _select(self, df: DataFrame, name: str, build: Callable[[], Sequence[Column]]) -> DataFrame:
        jdf = getattr(df, "_jdf", None)
        if jdf is None:  # not a classic (py4j) DataFrame
            return df.select(*self.get(name, lambda: list(build())))
        return type(df)(jdf.select(self._seq(name, build)), df.sparkSession)

    def group_agg(
        self,
        df: DataFrame,
        name: str,
        keys: Callable[[], Sequence[Column]],
        aggs: Callable[[], Sequence[Column]],
    ) -> DataFrame:
        """``df.groupBy(*keys()).agg(*aggs())`` (at least one aggregate), built once."""
        return self.frame(df, f"agg:{name}", lambda d: self._group_agg(d, name, keys, aggs))

    def _group_agg(
        self,
        df: DataFrame,
        name: str,
        keys: Callable[[], Sequence[Column]],
        aggs: Callable[[], Sequence[Column]],
    ) -> DataFrame:
        built = self.get(f"{name}:aggs", lambda: list(aggs()))
        jdf = getattr(df, "_jdf", None)
        if jdf is None:
            return df.groupBy(*self.get(f"{name}:keys", lambda: list(keys()))).agg(*built)
        first = built[0]._jc
        rest = self._seq(f"{name}:rest", lambda: built[1:])
        grouped = jdf.groupBy(self._seq(f"{name}:keys", keys))
        return type(df)(grouped.agg(first, rest), df.sparkSession)


class Node(Protocol):
    desc: RelationDesc

    def step(self, ctx: StepContext) -> Lazy: ...

    def drop(self) -> None: ...


def scalar(expr: ScalarExpr, desc: RelationDesc, names: list[str] | None = None) -> Column:
    """``expr`` over a DataFrame whose columns at positions ``0…`` are ``names`` (default
    ``c0…``) and have the types of ``desc``."""
    from spate.render.layout import data_names
    from spate.render.scalar import compile_scalar

    return compile_scalar(expr, desc, names if names is not None else data_names(desc.arity))
