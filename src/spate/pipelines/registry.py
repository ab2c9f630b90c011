"""The registry the real ``pyspark.pipelines`` decorators register into when spate loads a
pipeline's files.

``@dp.materialized_view``, ``@dp.table``, ``@dp.temporary_view``, ``@dp.append_flow``,
``dp.create_streaming_table`` and ``dp.create_sink`` call the active
:class:`~pyspark.pipelines.graph_element_registry.GraphElementRegistry`; this one adds each
output and flow to a :class:`~spate.pipelines.graph.Graph`. A flow's query function is called
at once, as ``spark-pipelines`` calls it, against a Spark Connect session that never connects:
the DataFrame it returns is only a plan, kept as the protobuf bytes Spark Connect would send.

This module runs only in the loader process (:mod:`spate.pipelines.loader`), where pyspark is
in Spark Connect mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.pipelines.flow import Flow as SparkFlow
from pyspark.pipelines.graph_element_registry import GraphElementRegistry
from pyspark.pipelines.output import (
    MaterializedView,
    Output,
    Sink,
    StreamingTable,
    TemporaryView,
)

from spate.pipelines._call_sites import plan_ids
from spate.pipelines._expect_api import MARKS
from spate.pipelines.errors import DefinitionError
from spate.pipelines.expectations import Expectation
from spate.pipelines.graph import Dataset, DatasetKind, Flow, Graph, Location
from spate.pipelines.sql_files import register_sql_file

__all__ = ["SpateGraphElementRegistry"]


def _kind(output: Output) -> DatasetKind:
    if isinstance(output, MaterializedView):
        return DatasetKind.MATERIALIZED_VIEW
    if isinstance(output, StreamingTable):
        return DatasetKind.STREAMING_TABLE
    if isinstance(output, TemporaryView):
        return DatasetKind.TEMPORARY_VIEW
    if isinstance(output, Sink):
        return DatasetKind.SINK
    raise DefinitionError(f"unknown pipeline output {type(output).__name__}")


class SpateGraphElementRegistry(GraphElementRegistry):
    """Adds what the decorators register to ``graph``; ``client`` is the offline Spark Connect
    client the query functions' plans are serialized with; ``sites`` the user's line that made
    each plan node, by plan id (:func:`~spate.pipelines._call_sites.record_call_sites`), kept
    with each flow for the nodes of its plan."""

    def __init__(
        self, graph: Graph, client: Any, *, sites: Mapping[int, Location] | None = None
    ) -> None:
        self.graph = graph
        self._client = client
        self._sites: Mapping[int, Location] = sites if sites is not None else {}
        self.last_target: str | None = None
        """The dataset the last flow registered writes, until an expectation decorator above
        its dataset decorator takes it (:mod:`spate.pipelines._expect_api`)."""

    def register_output(self, output: Output) -> None:
        loc = output.source_code_location
        sink = output if isinstance(output, Sink) else None
        self.graph.add_dataset(
            Dataset(
                name=output.name,
                kind=_kind(output),
                location=Location(loc.filename, loc.line_number),
                comment=output.comment,
                sink_format=None if sink is None else sink.format,
                sink_options={} if sink is None else dict(sink.options),
            )
        )

    def register_flow(self, flow: SparkFlow) -> None:
        loc = flow.source_code_location
        where = Location(loc.filename, loc.line_number)
        try:
            df = flow.func()
        except Exception as e:
            raise DefinitionError(
                f"the query function of flow {flow.name!r} at {where} failed: "
                f"{type(e).__name__}: {e} (a query function must only build a DataFrame: "
                f"schema, columns, collect and other calls that ask a Spark server are not "
                f"available while a pipeline is defined)"
            ) from None
        plan = getattr(df, "_plan", None)
        if plan is None:
            raise DefinitionError(
                f"the query function of flow {flow.name!r} at {where} returned "
                f"{type(df).__name__}, not a DataFrame"
            )
        relation = plan.plan(self._client)
        sites = {p: self._sites[p] for p in sorted(plan_ids(relation)) if p in self._sites}
        self.graph.add_flow(
            Flow(
                name=flow.name,
                target=flow.target,
                location=where,
                relation=relation.SerializeToString(),
                spark_conf=dict(flow.spark_conf),
                sites=sites,
            )
        )
        for name, constraint, action, loc in getattr(flow.func, MARKS, []):
            self.graph.add_expectation(Expectation(flow.target, name, constraint, action, loc))
        self.last_target = flow.target

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        register_sql_file(self.graph, sql_text, str(file_path))
