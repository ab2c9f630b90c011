"""The dataflow graph of a pipeline: its datasets, the flows that write them, their order.

A :class:`Dataset` is what a pipeline outputs (a materialized view, a streaming table, a
temporary view, a sink); a :class:`Flow` is one query writing into a dataset: a Spark Connect
plan (``relation``, the protobuf bytes of the query function's DataFrame) or a SQL query
(``sql``). A materialized view or temporary view has exactly one flow; a streaming table has
one or more (``@dp.append_flow``), whose rows it holds together (a UNION ALL). The graph is
acyclic and every read names a dataset of the graph or an input.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from spate.pipelines.errors import DefinitionError

__all__ = ["Action", "Dataset", "DatasetKind", "Expectation", "Flow", "Graph", "Location"]


class DatasetKind(Enum):
    MATERIALIZED_VIEW = "materialized view"
    STREAMING_TABLE = "streaming table"
    TEMPORARY_VIEW = "temporary view"
    SINK = "sink"


@dataclass(frozen=True, slots=True)
class Location:
    """Where a definition is in the user's files: ``file:line``."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


class Action(Enum):
    WARN = "warn"
    DROP = "drop"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Expectation:
    """A check on every row of ``dataset``: ``constraint`` is a Spark SQL boolean expression
    over the dataset's columns, ``location`` the line of the decorator."""

    dataset: str
    name: str
    constraint: str
    action: Action
    location: Location

    def to_json(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "name": self.name,
            "constraint": self.constraint,
            "action": self.action.value,
            "file": self.location.file,
            "line": self.location.line,
        }

    @staticmethod
    def from_json(d: dict[str, object]) -> Expectation:
        line = d["line"]
        return Expectation(
            dataset=str(d["dataset"]),
            name=str(d["name"]),
            constraint=str(d["constraint"]),
            action=Action(str(d["action"])),
            location=Location(str(d["file"]), line if isinstance(line, int) else None),
        )


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    kind: DatasetKind
    location: Location
    comment: str | None = None
    sink_format: str | None = None
    sink_options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Flow:
    """One query into ``target``; exactly one of ``relation`` (Spark Connect protobuf bytes)
    and ``sql`` (a Spark SQL query) is set. ``location`` is the line of the flow's decorator;
    ``sites`` maps the plan id of a node of ``relation`` to the line of the user's file that
    made it (the DataFrame call), where it is known (a graph cached before sites were recorded
    has none)."""

    name: str
    target: str
    location: Location
    relation: bytes | None = None
    sql: str | None = None
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    sites: Mapping[int, Location] = field(default_factory=dict)


@dataclass(slots=True)
class Graph:
    """The datasets and flows a pipeline's files define, as they register."""

    datasets: dict[str, Dataset] = field(default_factory=dict)
    flows: list[Flow] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    """The datasets' expectations, in the order they were declared."""

    def add_expectation(self, expectation: Expectation) -> None:
        self.expectations.append(expectation)

    def expectations_of(self, name: str) -> list[Expectation]:
        return [e for e in self.expectations if e.dataset == name]

    def add_dataset(self, dataset: Dataset) -> None:
        if dataset.name in self.datasets:
            first = self.datasets[dataset.name].location
            raise DefinitionError(
                f"dataset {dataset.name!r} is defined twice: at {first} and {dataset.location}"
            )
        self.datasets[dataset.name] = dataset

    def add_flow(self, flow: Flow) -> None:
        if any(f.name == flow.name for f in self.flows):
            raise DefinitionError(f"flow {flow.name!r} at {flow.location} is defined twice")
        self.flows.append(flow)

    def flows_into(self, name: str) -> list[Flow]:
        return [f for f in self.flows if f.target == name]

    def validate(self) -> None:
        """Every flow writes a dataset; a view has one flow; every dataset but a streaming table
        (which may be written by writes elsewhere) has a flow."""
        for f in self.flows:
            if f.target not in self.datasets:
                raise DefinitionError(
                    f"flow {f.name!r} at {f.location} writes {f.target!r}, which no definition "
                    f"creates; datasets: {', '.join(sorted(self.datasets)) or '(none)'}"
                )
        for e in self.expectations:
            if e.dataset not in self.datasets:
                raise DefinitionError(
                    f"expectation {e.name!r} at {e.location} is on {e.dataset!r}, which no "
                    f"definition creates"
                )
        for d in self.datasets.values():
            n = len(self.flows_into(d.name))
            if d.kind in (DatasetKind.MATERIALIZED_VIEW, DatasetKind.TEMPORARY_VIEW) and n != 1:
                raise DefinitionError(
                    f"{d.kind.value} {d.name!r} at {d.location} has {n} flows; it needs one"
                )

    def ordered(self, reads: Mapping[str, Iterable[str]]) -> list[str]:
        """The datasets in an order where each comes after every dataset it reads
        (``reads[name]``); raises :class:`DefinitionError` on a cycle."""
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = " -> ".join([*path[path.index(name) :], name])
                raise DefinitionError(
                    f"the pipeline's datasets read each other in a cycle: {cycle}"
                )
            state[name] = 1
            for dep in reads.get(name, ()):
                if dep in self.datasets:
                    visit(dep, [*path, name])
            state[name] = 2
            order.append(name)

        for name in self.datasets:
            visit(name, [])
        return order

    # -- the graph as JSON (from the process that loads the user's files) -------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "datasets": [
                {
                    "name": d.name,
                    "kind": d.kind.name,
                    "file": d.location.file,
                    "line": d.location.line,
                    "comment": d.comment,
                    "sink_format": d.sink_format,
                    "sink_options": dict(d.sink_options),
                }
                for d in self.datasets.values()
            ],
            "flows": [
                {
                    "name": f.name,
                    "target": f.target,
                    "file": f.location.file,
                    "line": f.location.line,
                    "relation": None
                    if f.relation is None
                    else base64.b64encode(f.relation).decode("ascii"),
                    "sql": f.sql,
                    "spark_conf": dict(f.spark_conf),
                    "sites": [
                        {"plan_id": pid, "file": loc.file, "line": loc.line}
                        for pid, loc in sorted(f.sites.items())
                    ],
                }
                for f in self.flows
            ],
            "expectations": [e.to_json() for e in self.expectations],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Graph:
        g = Graph()
        for d in data["datasets"]:
            g.add_dataset(
                Dataset(
                    name=str(d["name"]),
                    kind=DatasetKind[str(d["kind"])],
                    location=Location(str(d["file"]), d["line"]),
                    comment=d.get("comment"),
                    sink_format=d.get("sink_format"),
                    sink_options=dict(d.get("sink_options") or {}),
                )
            )
        for f in data["flows"]:
            rel = f.get("relation")
            g.add_flow(
                Flow(
                    name=str(f["name"]),
                    target=str(f["target"]),
                    location=Location(str(f["file"]), f["line"]),
                    relation=None if rel is None else base64.b64decode(rel),
                    sql=f.get("sql"),
                    spark_conf=dict(f.get("spark_conf") or {}),
                    sites={
                        int(s["plan_id"]): Location(str(s["file"]), s["line"])
                        for s in f.get("sites") or ()
                    },
                )
            )
        for e in data.get("expectations") or ():
            g.add_expectation(Expectation.from_json(dict(e)))
        return g
