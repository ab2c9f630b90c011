"""Prometheus metrics of a compute replica (served on an opt-in port, see ``main``).

Every series carries the ``replica`` label; per-collection series also ``collection``.
"""

from __future__ import annotations

import contextlib
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from spate.compute.replica.reconcile import ReconciliationStats
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId

_LATENCY_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

COMMANDS: Final = Counter(
    "spate_compute_replica_commands", "Commands received", ["replica", "command"]
)
RESPONSES: Final = Counter(
    "spate_compute_replica_responses", "Responses sent", ["replica", "response"]
)
DATAFLOWS: Final = Gauge("spate_compute_replica_dataflows", "Running dataflows", ["replica"])
STEPS: Final = Counter("spate_compute_replica_steps", "Dataflow steps", ["replica"])
STEP_FAILURES: Final = Counter(
    "spate_compute_replica_step_failures", "Failed dataflow steps", ["replica"]
)
DATAFLOW_FAILURES: Final = Counter(
    "spate_compute_replica_dataflow_failures", "Dataflows that failed for good", ["replica"]
)
STEP_SECONDS: Final = Histogram(
    "spate_compute_replica_step_seconds", "Time per step", ["replica"], buckets=_LATENCY_BUCKETS
)
BUILD_SECONDS: Final = Histogram(
    "spate_compute_replica_build_seconds",
    "Time to build a dataflow",
    ["replica"],
    buckets=_LATENCY_BUCKETS,
)
PEEK_SECONDS: Final = Histogram(
    "spate_compute_replica_peek_seconds",
    "Time to read a peek's rows (after it became readable)",
    ["replica", "target"],
    buckets=_LATENCY_BUCKETS,
)
SINK_APPENDS: Final = Counter(
    "spate_compute_replica_sink_appends", "Materialized-view appends committed", ["replica"]
)
SINK_LOST_RACES: Final = Counter(
    "spate_compute_replica_sink_lost_races",
    "Materialized-view appends another writer got in first",
    ["replica"],
)
RECONCILIATION: Final = Gauge(
    "spate_compute_replica_reconciliation",
    "Dataflows reused, replaced and dropped by reconciliations since start",
    ["replica", "outcome"],
)
FRONTIER: Final = Gauge(
    "spate_compute_replica_frontier",
    "Output frontier of a live collection (the series goes when the collection is dropped)",
    ["replica", "collection"],
)


class ReplicaMetrics:
    """The metric children of one replica."""

    def __init__(self, replica: str) -> None:
        self.replica = replica
        self.dataflows = DATAFLOWS.labels(replica)
        self.steps = STEPS.labels(replica)
        self.step_failures = STEP_FAILURES.labels(replica)
        self.dataflow_failures = DATAFLOW_FAILURES.labels(replica)
        self.step_seconds = STEP_SECONDS.labels(replica)
        self.build_seconds = BUILD_SECONDS.labels(replica)
        self.sink_appends = SINK_APPENDS.labels(replica)
        self.sink_lost_races = SINK_LOST_RACES.labels(replica)

    def command(self, command: object) -> None:
        COMMANDS.labels(self.replica, type(command).__name__).inc()

    def response(self, response: object) -> None:
        RESPONSES.labels(self.replica, type(response).__name__).inc()

    def peek_seconds(self, target: str, seconds: float) -> None:
        PEEK_SECONDS.labels(self.replica, target).observe(seconds)

    def frontier(self, id: GlobalId, frontier: Frontier) -> None:
        t = frontier.as_option()
        if t is not None:
            FRONTIER.labels(self.replica, str(id)).set(t)
        else:
            with contextlib.suppress(KeyError):
                FRONTIER.remove(self.replica, str(id))

    def reconciliation(self, stats: ReconciliationStats) -> None:
        RECONCILIATION.labels(self.replica, "reused").set(stats.reused)
        RECONCILIATION.labels(self.replica, "replaced").set(stats.replaced)
        RECONCILIATION.labels(self.replica, "dropped").set(stats.dropped)
