"""The running parts of an environment, shared by its operation modules.

One ``Runtime`` per open environment, owned by its event loop thread: the persist client, the
combined controller, the catalog (cached, durable in consensus), the timestamp oracle, the
orchestrator and the replicas it runs. Operation modules (:mod:`.tables`, :mod:`.objects`,
:mod:`.reads`, :mod:`.clusters`) take a ``Runtime`` and change it only through its methods, so
that every catalog change is one durable commit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from spate.clock import Clock
from spate.compute.controller.controller import ComputeController
from spate.config import Settings
from spate.controller import Controller
from spate.environment.catalog import CatalogState, UnknownName
from spate.environment.catalog_store import CatalogStore
from spate.environment.layout import Layout
from spate.environment.oracle import TimestampOracle
from spate.environment.webhook.statistics import WebhookStatistics
from spate.ids import GlobalId, IdGen, InstanceId, ReplicaId
from spate.orchestrator.supervisor import Supervisor
from spate.persist.client import PersistClient
from spate.storage.controller.controller import StorageController
from spate.storage.controller.group_commit import GroupCommit

STORAGE_INSTANCE = InstanceId(0)
"""The storage instance that runs every source and sink."""
STORAGE_REPLICA = ReplicaId(0)


@dataclass
class Runtime:
    layout: Layout
    settings: Settings
    clock: Clock
    ids: IdGen
    persist: PersistClient
    oracle: TimestampOracle
    catalog_doc: CatalogStore
    catalog: CatalogState
    storage: StorageController
    compute: ComputeController
    controller: Controller
    orchestrator: Supervisor
    epoch: int
    storage_replica_started: bool = False
    commits: GroupCommit = field(init=False)
    """Every table write goes through it (one group commit per table per tick)."""
    webhooks: WebhookStatistics = field(default_factory=WebhookStatistics)
    """What the webhook endpoint was sent, per source (``source_statistics``)."""
    pipeline_expectations: dict[str, list[tuple[str, str, str, str, int, int]]] = field(
        default_factory=dict
    )
    """The rows of ``pipeline_expectations`` per pipeline, as its runner last read them
    (``spate.pipelines.runner.PipelineRunner.expectation_counts``)."""
    _transient: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.commits = GroupCommit(self.storage, self.oracle)

    def commit(self, change: Callable[[CatalogState], CatalogState]) -> CatalogState:
        """Apply ``change`` (pure, validating) to the catalog and make it durable."""
        change(self.catalog)  # validate against the cached state first: fail before any I/O

        def apply(current: CatalogState | None) -> CatalogState:
            return change(current if current is not None else CatalogState())

        self.catalog = self.catalog_doc.update(apply)
        return self.catalog

    def transient_id(self) -> GlobalId:
        return GlobalId.transient(next(self._transient))

    def instance_of(self, cluster: str) -> InstanceId:
        return self.catalog.cluster(cluster).instance

    def default_cluster(self, cluster: str | None) -> str:
        """``cluster``, or the only / first cluster with replicas; error if there is none
        (:func:`~spate.environment.clusters.cluster_for` creates the default one then)."""
        if cluster is not None:
            self.catalog.cluster(cluster)
            return cluster
        with_replicas = [c.name for c in self.catalog.clusters if c.replicas]
        if with_replicas:
            return with_replicas[0]
        if self.catalog.clusters:
            return self.catalog.clusters[0].name
        raise UnknownName("no cluster exists to run this; create one with create_cluster()")
