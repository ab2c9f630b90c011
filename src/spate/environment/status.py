"""What ``Environment.status()`` reports: collections with since / upper / lag, replicas with
health and hydration — read from the ``spate_catalog`` relations (:mod:`.introspection`)."""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from spate.clock import format_ms
from spate.environment import introspection
from spate.environment.catalog import IndexItem, MaterializedViewItem, SinkItem, SourceItem
from spate.environment.runtime import Runtime
from spate.frontier.antichain import Antichain, Frontier
from spate.repr.types import Datum
from spate.storage.controller.types import IntrospectionKind


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
    """A source's or sink's status (``starting``, ``running``, ``stalled``…), if known; a
    view's or index's ``error`` while its error collection is not empty at its latest time."""
    error: str | None = None
    """Why a source or sink is stalled or has ceased; why reads of a view in error fail."""


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
        coll = Table(title=f"collections (read ts {format_ms(self.read_ts)})")
        for h in ("name", "kind", "id", "since", "upper", "lag", "cluster", "hydrated", "status"):
            coll.add_column(h, no_wrap=h in ("since", "upper"))
        for c in self.collections:
            coll.add_row(
                c.name,
                c.kind,
                c.id,
                show_frontier(c.since),
                show_frontier(c.upper),
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


def show_frontier(f: Frontier) -> str:
    """A frontier as people read it: its time as a timestamp (``{}``: closed, no more times)."""
    t = f.as_option()
    if t is None:
        return "{}"
    return format_ms(t) if t > 0 else str(t)


def render_tables(tables: list[Table], width: int = 160) -> str:
    """``tables`` as plain text, as a console of ``width`` columns prints them."""
    text = io.StringIO()
    console = Console(file=text, width=width, color_system=None, force_terminal=False)
    for table in tables:
        console.print(table)
    return text.getvalue().rstrip("\n")


def _frontier(t: int | None) -> Frontier:
    return Antichain.empty() if t is None else Antichain.of(t)


def _int(v: Datum) -> int:
    assert isinstance(v, int)
    return v


def _opt_int(v: Datum) -> int | None:
    return None if v is None else _int(v)


def _opt_str(v: Datum) -> str | None:
    return None if v is None else str(v)


async def collect(rt: Runtime) -> EnvironmentStatus:
    """The status, read from the ``spate_catalog`` relations (written first, so that it is
    the present): ``frontiers``, ``hydration``, ``source_statistics``, ``sink_statistics``
    and ``replicas``."""
    K = IntrospectionKind
    await introspection.refresh(rt)
    frontiers = {r[0]: r for r in await introspection.read(rt, K.COLLECTION_FRONTIERS)}
    hydrated: dict[Datum, bool] = {}
    for r in await introspection.read(rt, K.HYDRATION):
        hydrated[r[0]] = hydrated.get(r[0], False) or bool(r[5])
    statuses = {
        r[0]: (_opt_str(r[2]), _opt_str(r[6]))
        for kind in (K.SOURCE_SUMMARY, K.SINK_SUMMARY)
        for r in await introspection.read(rt, kind)
    }
    rows: list[CollectionStatus] = []
    for item in rt.catalog:  # user objects, in catalog order
        f = frontiers.get(str(item.id))
        if f is None:
            continue
        kind = str(f[2])
        status = CollectionStatus(
            str(f[1]),
            kind,
            str(f[0]),
            _frontier(_opt_int(f[4])),
            _frontier(_opt_int(f[5])),
            _opt_int(f[6]),
            _opt_str(f[3]),
            hydrated.get(f[0], True) if kind in ("materialized view", "index") else None,
        )
        current, error = statuses.get(f[0], (None, None))
        if isinstance(item, (SourceItem, SinkItem)) and current is not None:
            status = dataclasses.replace(status, status=current, error=error)
        if isinstance(item, (MaterializedViewItem, IndexItem)):
            # its error collection is not empty at its latest time (a replica's last report)
            problem = rt.compute.collection_error(rt.instance_of(item.cluster), item.id)
            if problem is not None:
                status = dataclasses.replace(status, status="error", error=problem)
        rows.append(status)
    order = {
        (c.name, r.name): n
        for n, (c, r) in enumerate((c, r) for c in rt.catalog.clusters for r in c.replicas)
    }
    replicas = sorted(
        (
            ReplicaStatus(
                cluster=str(r[2]),
                name=str(r[1]),
                id=str(r[0]),
                process=str(r[3]),
                health=str(r[4]),
                restarts=_int(r[5]),
                hydrated=_int(r[7]),
                collections=_int(r[8]),
                last_error=_opt_str(r[9]),
            )
            for r in await introspection.read(rt, K.REPLICAS)
        ),
        key=lambda r: order.get((r.cluster, r.name), len(order)),
    )
    return EnvironmentStatus(
        str(rt.layout.data_dir),
        rt.epoch,
        rt.oracle.read_ts(),
        rt.clock.now_millis(),
        tuple(rows),
        tuple(replicas),
    )
