"""``spate status <data-dir>``: what an environment holds, read without opening it.

Opening an environment claims a new epoch and would fence one that is running, so status reads
the durable state directly: the catalog, the storage controller's id → shard mapping, the
``spate_catalog.frontiers`` relation (each collection's since and upper as the environment
last recorded them; a shard's own since and upper when it has no row there), the
``spate_catalog.errors`` relation (a view or index whose reads failed with an evaluation error
when the environment last recorded it shows status ``error`` and the message) and the replica
services' process files. Indexes and hydration live
in a running controller's memory; they are shown by ``Environment.status()``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from spate.clock import SystemClock
from spate.config import Settings
from spate.environment import placement
from spate.environment.builtins import builtin_of
from spate.environment.catalog import CatalogState, kind_of
from spate.environment.catalog_store import CatalogStore, CatalogUnreadable
from spate.environment.clusters import service_name
from spate.environment.services import layout_of
from spate.environment.status import show_frontier
from spate.errors import UsageError
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import SystemIdGen
from spate.orchestrator.process import pid_alive
from spate.persist.client import PersistClient
from spate.repr.arrow import table_to_updates
from spate.repr.types import Datum
from spate.storage.controller.metadata import ControllerMetadata, MetadataStore
from spate.storage.controller.types import IntrospectionKind


@dataclass(frozen=True, slots=True)
class OfflineCollection:
    name: str
    kind: str
    id: str
    shard: str | None
    since: Frontier
    upper: Frontier
    status: str | None = None
    """``error`` for a view or index whose error collection was not empty at its latest time
    when the environment last recorded ``spate_catalog.errors``."""
    error: str | None = None
    """Why reads of it failed then (the evaluation error, naming the expression and a row)."""


@dataclass(frozen=True, slots=True)
class OfflineReplica:
    cluster: str
    name: str
    pid: int | None
    running: bool
    placed_at: str | None = None
    """``HOST:PORT`` of a replica started elsewhere (its process is not visible here)."""


@dataclass(frozen=True, slots=True)
class OfflineStatus:
    data_dir: str
    epoch: int
    collections: tuple[OfflineCollection, ...]
    replicas: tuple[OfflineReplica, ...]
    problems: tuple[str, ...] = ()
    """What could not be read (an undecodable catalog, with how to repair it)."""

    def tables(self) -> list[Table]:
        problems = Table(title="problems")
        problems.add_column("problem")
        for p in self.problems:
            problems.add_row(p)
        return ([problems] if self.problems else []) + self._tables()

    def _tables(self) -> list[Table]:
        now = time.time_ns() // 1_000_000
        coll = Table(title=f"{self.data_dir} (last epoch {self.epoch})")
        for h in ("name", "kind", "id", "since", "upper", "behind wall clock", "status"):
            coll.add_column(h, no_wrap=h in ("since", "upper"))
        for c in self.collections:
            upper = c.upper.as_option()
            coll.add_row(
                c.name,
                c.kind,
                c.id,
                show_frontier(c.since),
                show_frontier(c.upper),
                "-" if upper is None else f"{max(0, now - upper) / 1000:.1f} s",
                (c.status or "-") + (f": {c.error}" if c.error else ""),
            )
        reps = Table(title="replica processes")
        for h in ("cluster", "replica", "pid", "running"):
            reps.add_column(h)
        for r in self.replicas:
            if r.placed_at is not None:
                reps.add_row(r.cluster, r.name, "-", f"elsewhere, at {r.placed_at}")
                continue
            reps.add_row(r.cluster, r.name, str(r.pid or "-"), "yes" if r.running else "no")
        return [coll, reps]


def inspect_environment(data_dir: Path, settings: Settings | None = None) -> OfflineStatus:
    """What the environment in ``data_dir`` holds; ``settings`` say where its persist data is
    (default: embedded under ``data_dir``)."""
    layout = layout_of(Path(data_dir), settings or Settings(data_dir=Path(data_dir)))
    if layout.persist is None and not (layout.data_dir / "consensus.db").exists():
        raise UsageError(f"{data_dir} holds no spate environment (no consensus.db)")
    client = PersistClient(layout.location(), clock=SystemClock(), ids=SystemIdGen())
    try:
        consensus = client.consensus
        problems: list[str] = []
        try:
            catalog = CatalogStore(consensus).load() or CatalogState()
        except CatalogUnreadable as e:
            problems.append(str(e))
            catalog = CatalogState()
        epoch_raw = consensus.head("environment/epoch")
        meta = MetadataStore(consensus).load()
        recorded = {
            str(row[0]): (_frontier(row[4]), _frontier(row[5]))
            for row in _recorded(client, meta, IntrospectionKind.COLLECTION_FRONTIERS)
        }
        errors: dict[str, str] = {}
        for row in _recorded(client, meta, IntrospectionKind.ERRORS):
            errors.setdefault(str(row[0]), str(row[4]))  # one replica's message is enough
        rows = []
        for item in catalog:
            durable = meta.collections.get(item.id)
            since: Frontier = Antichain.empty()
            upper: Frontier = Antichain.empty()
            shard = None if durable is None else str(durable.shard)
            if str(item.id) in recorded:
                since, upper = recorded[str(item.id)]
            elif durable is not None:
                state = client.fetch_state(durable.shard)
                since, upper = state.since, state.upper
            error = errors.get(str(item.id))
            rows.append(
                OfflineCollection(
                    item.name,
                    kind_of(item),
                    str(item.id),
                    shard,
                    since,
                    upper,
                    None if error is None else "error",
                    error,
                )
            )
        replicas = []
        placed = placement.load(consensus)
        for cluster in catalog.clusters:
            for r in cluster.replicas:
                address = (settings.placement(cluster.name) if settings else {}).get(r.name)
                address = address or placed.address(cluster.name, r.name)
                if address is not None:
                    replicas.append(OfflineReplica(cluster.name, r.name, None, False, address))
                    continue
                pid_file = layout.data_dir / "services" / service_name(cluster.name, r.name) / "pid"
                pid = int(pid_file.read_text()) if pid_file.exists() else None
                replicas.append(
                    OfflineReplica(cluster.name, r.name, pid, pid is not None and pid_alive(pid))
                )
        epoch = meta.epoch if epoch_raw is None else _epoch(epoch_raw.data, meta.epoch)
        return OfflineStatus(str(data_dir), epoch, tuple(rows), tuple(replicas), tuple(problems))
    finally:
        client.close()


def _frontier(t: Datum) -> Frontier:
    return Antichain.of(t) if isinstance(t, int) else Antichain.empty()


def _recorded(
    client: PersistClient, meta: ControllerMetadata, kind: IntrospectionKind
) -> list[tuple[Datum, ...]]:
    """The rows of the ``spate_catalog`` relation of ``kind`` as the environment last wrote
    it (none if it never wrote the relation)."""
    relation = builtin_of(kind)
    durable = meta.collections.get(relation.id)
    if durable is None:
        return []
    upper = client.fetch_state(durable.shard).upper.as_option()
    if upper is None or upper == 0:
        return []
    reader = client.open_leased_reader(durable.shard, relation.desc)
    try:
        updates = table_to_updates(reader.snapshot(upper - 1))
    finally:
        reader.expire()
    return [tuple(row) for row, _t, diff in updates if diff > 0]


def _epoch(data: bytes, fallback: int) -> int:
    from spate.codec import decode
    from spate.environment.core import EpochState

    try:
        return decode(data, EpochState).epoch
    except Exception:
        return fallback
