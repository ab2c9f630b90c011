"""What the replica needs from the renderer (``spate.render``), as typed protocols.

:class:`Renderer` builds a :class:`RenderedDataflow` from a dataflow description and an input
resolver; the shipped one is :class:`spate.render.dataflow.Dataflow` (:func:`spark_renderer`).
Unit tests substitute a renderer without Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from spate.errors import Problem
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription
from spate.plan.finishing import RowSetFinishing
from spate.repr.desc import RelationDesc
from spate.repr.types import Row

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spate.render.arrangement import Arrangement  # type: ignore[import-not-found,unused-ignore]
    from spate.render.input import InputResolver  # type: ignore[import-not-found,unused-ignore]


class StepResult(Protocol):
    """What a step reports (render's ``StepReport``)."""

    @property
    def sink_updates(self) -> Mapping[GlobalId, pa.Table]: ...

    @property
    def actions(self) -> int:
        """Spark actions (jobs) the step ran."""
        ...

    @property
    def rows_in(self) -> int:
        """Input updates the step read."""
        ...

    @property
    def rows_out(self) -> int:
        """Updates the step produced into the exports."""
        ...

    @property
    def errors(self) -> pa.Table | None:
        """The step's updates of the dataflow's error collection (record, time, diff)."""
        ...


class RenderedDataflow(Protocol):
    """A running dataflow (``spate.render.dataflow.Dataflow``)."""

    @property
    def upper(self) -> Frontier: ...

    def ready_upper(self) -> Frontier: ...

    def step(self, upper: Frontier | None = None) -> StepResult: ...

    def peek(
        self,
        export: GlobalId,
        *,
        timestamp: int,
        finishing: RowSetFinishing | None = None,
        literal_constraints: Sequence[Row] | None = None,
        result_desc: RelationDesc | None = None,
    ) -> pa.Table: ...

    def allow_compaction(self, export: GlobalId, frontier: Frontier) -> None: ...

    def error_at(self, timestamp: int) -> Problem | None:
        """Why a read at ``timestamp`` fails: the dataflow's error collection is not empty
        there (``None``: it is empty)."""
        ...

    def arrangement(self, export: GlobalId) -> Arrangement: ...

    def drop(self) -> None: ...


class Renderer(Protocol):
    """Builds a running dataflow: ``spate.render.dataflow.Dataflow``."""

    def __call__(
        self,
        description: DataflowDescription,
        resolver: InputResolver,
        *,
        spark: SparkSession,
        scratch: Path,
        name: str | None = None,
    ) -> RenderedDataflow: ...


def spark_renderer() -> Renderer:
    """The shipped renderer (Spark)."""
    from spate.render.dataflow import Dataflow  # type: ignore[import-not-found,unused-ignore]

    renderer: Renderer = Dataflow
    return renderer
