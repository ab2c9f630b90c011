"""What ``Environment.status()`` reports: collections with since / upper / lag, replicas with
health and hydration."""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from spate.environment.catalog import (
    IndexItem,
    MaterializedViewItem,
    SinkItem,
    SourceItem,
    SubsourceItem,
    TableItem,
    kind_of,
)
from spate.environment.clusters import service_name
from spate.environment.runtime import Runtime
from spate.frontier.antichain import Antichain, Frontier
from spate.orchestrator.service import ServiceMissing


@dataclass(frozen=True, slots=True)
class CollectionStatus:
    name: str
    kind: str
    id: str
    since: Frontier
    upper: Frontier
    lag_ms: int | None
    cluster: str | None = None
    hydrated: bool | None = None
    status: str | None = None
    """A source's or sink's status (``starting``, ``running``, ``stalled``…), if known."""
    error: str | None = None
    """Why a source or sink is stalled or has ceased."""


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    cluster: str
    name: str
    id: str
    process: str
    health: str
    restarts: int
    hydrated: int
    collections: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class EnvironmentStatus:
    data_dir: str
    epoch: int
    read_ts: int
    now_ms: int
    collections: tuple[CollectionStatus, ...]
    replicas: tuple[ReplicaStatus, ...]

    def collection(self, name: str) -> CollectionStatus:
        for c in self.collections:
            if c.name == name:
                return c
        raise KeyError(name)

    def __str__(self) -> str:
        """The tables ``spate status`` prints, as text (``print(env.status())``)."""
        return render_tables(self.tables())

    def tables(self) -> list[Table]:
        """Rich tables for the console."""
        coll = Table(title=f"collections (read ts {self.read_ts})")
        for h in ("name", "kind", "id", "since", "upper", "lag", "cluster", "hydrated", "status"):
            coll.add_column(h)
        for c in self.collections:
            coll.add_row(
                c.name,
                c.kind,
                c.id,
                str(c.since),
                str(c.upper),
                "-" if c.lag_ms is None else f"{c.lag_ms} ms",
                c.cluster or "-",
                "-" if c.hydrated is None else ("yes" if c.hydrated else "no"),
                (c.status or "-") + (f": {c.error}" if c.error else ""),
            )
        reps = Table(title="replicas")
        for h in ("cluster", "replica", "process", "health", "restarts", "hydrated", "last error"):
            reps.add_column(h)
        for r in self.replicas:
            reps.add_row(
                r.cluster,
                f"{r.name} ({r.id})",
                r.process,
                r.health,
                str(r.restarts),
                f"{r.hydrated}/{r.collections}",
                r.last_error or "",
            )
        return [coll, reps]


def render_tables(tables: list[Table], width: int = 120) -> str:
    """``tables`` as plain text, as a console of ``width`` columns prints them."""
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False)
    for table in tables:
        console.print(table)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return str(out).rstrip("\n")


def _lag(now_ms: int, upper: Frontier) -> int | None:
    t = upper.as_option()
    return None if t is None else max(0, now_ms - t)


def collect(rt: Runtime) -> EnvironmentStatus:
    now = rt.clock.now_millis()
    rows: list[CollectionStatus] = []
    for item in rt.catalog:
        if isinstance(item, (TableItem, SourceItem, SubsourceItem, MaterializedViewItem)):
            f = rt.storage.collection_frontiers(item.id)
            on = item.cluster if isinstance(item, MaterializedViewItem) else None
            hydrated = None
            if isinstance(item, MaterializedViewItem):
                hydrated = rt.compute.collection_hydrated(rt.instance_of(item.cluster), item.id)
            rows.append(
                CollectionStatus(
                    item.name,
                    kind_of(item),
                    str(item.id),
                    f.since,
                    f.upper,
                    _lag(now, f.upper),
                    on,
                    hydrated,
                )
            )
        elif isinstance(item, IndexItem):
            instance = rt.instance_of(item.cluster)
            cf = rt.compute.collection_frontiers(item.id, instance)
            rows.append(
                CollectionStatus(
                    item.name,
                    "index",
                    str(item.id),
                    cf.read_frontier,
                    cf.write_frontier,
                    _lag(now, cf.write_frontier),
                    item.cluster,
                    rt.compute.collection_hydrated(instance, item.id),
                )
            )
        elif isinstance(item, SinkItem):
            rows.append(
                CollectionStatus(
                    item.name, "sink", str(item.id), Antichain.empty(), Antichain.empty(), None
                )
            )
        if isinstance(item, (SourceItem, SinkItem)):
            last = rt.storage.status(item.id)
            if last is not None:
                rows[-1] = dataclasses.replace(rows[-1], status=last.status.value, error=last.error)
    replicas: list[ReplicaStatus] = []
    for cluster in rt.catalog.clusters:
        for r in cluster.replicas:
            info = rt.compute.replica_info(cluster.instance, r.id)
            service = service_name(cluster.name, r.name)
            process: str
            try:
                process = rt.orchestrator.status(service)
                restarts = rt.orchestrator.restarts(service)
                placed = rt.orchestrator.placed(service)
                if placed is not None:
                    process = f"at {placed}"
            except (ServiceMissing, KeyError):
                process, restarts = "missing", 0
            replicas.append(
                ReplicaStatus(
                    cluster.name,
                    r.name,
                    str(r.id),
                    process,
                    info.health,
                    restarts,
                    info.hydrated_collections,
                    info.collections,
                    info.last_error,
                )
            )
    return EnvironmentStatus(
        str(rt.layout.data_dir), rt.epoch, rt.oracle.read_ts(), now, tuple(rows), tuple(replicas)
    )
