"""A pipeline's graph compiled to spate: one Spark SQL query per dataset, in dependency order.

Each flow's plan (a DataFrame's Spark Connect plan, or a SQL file's query) is translated
(:mod:`spate.pipelines.relations`) against the columns of what it reads: the datasets before it,
the file inputs (:mod:`spate.pipelines.inputs`) and any spate table, source or view the
environment already has (``existing``). A streaming table written by several flows holds their
rows together (``UNION ALL``, matched by column name, as Spark appends by name).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from spate.pipelines.errors import DefinitionError, NotMaintainable
from spate.pipelines.expectations import (
    Expectation,
    checked_sql,
    counts_sql,
    validate_expectations,
)
from spate.pipelines.expressions import ident
from spate.pipelines.graph import DatasetKind, Flow, Graph, Location
from spate.pipelines.inputs import FileInput, describe_input
from spate.pipelines.relations import Rel, Translator, sql_rel
from spate.pipelines.spec import PipelineSpec

__all__ = ["CompiledDataset", "CompiledPipeline", "compile_pipeline"]


@dataclass(frozen=True, slots=True)
class CompiledDataset:
    name: str
    kind: DatasetKind
    location: Location
    sql: str
    """The Spark SQL query whose result the dataset is, at every time."""
    columns: list[str]
    reads: frozenset[str]
    expectations: tuple[Expectation, ...] = ()
    counts_sql: str | None = None
    """The query counting the rows passing and failing each expectation
    (:func:`~spate.pipelines.expectations.counts_sql`); None without expectations."""


@dataclass(slots=True)
class CompiledPipeline:
    spec: PipelineSpec
    graph: Graph
    datasets: list[CompiledDataset] = field(default_factory=list)
    inputs: dict[str, FileInput] = field(default_factory=dict)

    def dataset(self, name: str) -> CompiledDataset:
        for d in self.datasets:
            if d.name == name:
                return d
        raise KeyError(name)

    def describe(self) -> str:
        """The graph, as ``spate pipeline dry-run`` prints it."""
        lines = [f"pipeline {self.spec.name} ({self.spec.path})"]
        for inp in self.inputs.values():
            cols = ", ".join(n for n, _ in inp.columns)
            lines.append(f"  input {inp.table}: {inp.format} files in {inp.directory} ({cols})")
        for d in self.datasets:
            reads = ", ".join(sorted(d.reads)) or "-"
            lines.append(
                f"  {d.kind.value} {d.name} [{d.location}] reads {reads}: ({', '.join(d.columns)})"
            )
            for e in d.expectations:
                lines.append(
                    f"    expectation {e.name} [{e.location}] {e.action.value}: {e.constraint}"
                )
        return "\n".join(lines)


def _walk(msg: Any) -> Iterator[Any]:
    yield msg
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.is_repeated:
            if fd.message_type.GetOptions().map_entry:
                continue
            for v in value:
                yield from _walk(v)
        else:
            yield from _walk(value)


def _sql_reads(query: str) -> set[str]:
    try:
        tree = sqlglot.parse_one(query, read="spark")
    except sqlglot.ParseError:
        return set()
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return {t.name for t in tree.find_all(exp.Table) if t.name and t.name not in ctes}


def _relation(flow: Flow) -> Any:
    import pyspark.sql.connect.proto as pb

    rel = pb.Relation()
    rel.ParseFromString(flow.relation)
    return rel


def flow_reads(flow: Flow) -> set[str]:
    """The names a flow reads (tables and views; not files)."""
    if flow.sql is not None:
        return _sql_reads(flow.sql)
    out: set[str] = set()
    for m in _walk(_relation(flow)):
        name = m.DESCRIPTOR.name
        if name == "NamedTable":
            out.add(m.unparsed_identifier.split(".")[-1].strip("`"))
        elif name == "SQL":
            out |= _sql_reads(m.query)
    return out


def compile_pipeline(
    spec: PipelineSpec, graph: Graph, *, existing: Mapping[str, list[str]] | None = None
) -> CompiledPipeline:
    """Translate every dataset of ``graph``; raises :class:`NotMaintainable` or
    :class:`DefinitionError` naming the dataset and the line, before anything is created."""
    out = CompiledPipeline(spec, graph)
    reads = {
        name: set().union(*(flow_reads(f) for f in graph.flows_into(name)))
        for name in graph.datasets
    }
    schemas: dict[str, list[str]] = dict(existing or {})

    def sources(ds: Any, dataset: str) -> tuple[str, list[str]]:
        inp = describe_input(ds, dataset, spec.root)
        out.inputs.setdefault(inp.table, inp)
        return inp.table, inp.names()

    for name in graph.ordered(reads):
        d = graph.datasets[name]
        flows = graph.flows_into(name)
        if not flows:
            raise DefinitionError(f"{d.kind.value} {name!r} at {d.location} has no flow")
        if d.kind is DatasetKind.SINK:
            raise NotMaintainable(name, "a sink", str(d.location), "sinks are not supported yet")
        rels: list[Rel] = []
        for f in flows:
            where = str(f.location)
            if f.sql is not None:
                rels.append(sql_rel(f.sql, schemas, name, where))
            else:
                sites = {pid: str(loc) for pid, loc in f.sites.items()}
                translator = Translator(name, where, schemas, sources, sites=sites)
                rels.append(translator.relation(_relation(f)))
        first = rels[0]
        sql = first.sql
        for other in rels[1:]:
            lower = {c.lower(): c for c in other.columns}
            missing = [c for c in first.columns if c.lower() not in lower]
            if missing:
                raise DefinitionError(f"a flow into {name!r} lacks the columns {missing}")
            cols = ", ".join(ident(lower[c.lower()]) for c in first.columns)
            sql = f"{sql} UNION ALL SELECT {cols} FROM ({other.sql}) AS _f"
        all_reads = frozenset().union(*(r.reads for r in rels))
        expectations = tuple(graph.expectations_of(name))
        counts = None
        if expectations:
            validate_expectations(expectations, first.columns)
            counts = counts_sql(sql, expectations)
            sql = checked_sql(sql, first.columns, expectations)
        out.datasets.append(
            CompiledDataset(
                name, d.kind, d.location, sql, first.columns, all_reads, expectations, counts
            )
        )
        schemas[name] = first.columns
    return out
