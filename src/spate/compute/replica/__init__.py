"""The compute replica: the process that runs dataflows on Spark and speaks the compute protocol.

Layers, from the wire inwards:

* :mod:`~spate.compute.replica.main` — ``spate replica --role compute`` (flags, secret file,
  scratch directory, SparkSession, metrics port, exit codes);
* :mod:`~spate.compute.replica.server` — the transport handler: commands to the state machine,
  actions to the runtime, responses to the connection in order;
* :mod:`~spate.compute.replica.state` — the sans-I/O state machine (stages, reconciliation,
  frontiers, peeks, subscribes, compaction, failures), with :mod:`.reconcile`,
  :mod:`.frontiers`, :mod:`.subscribe`, :mod:`.peeks`, :mod:`.records`, :mod:`.actions`;
* :mod:`~spate.compute.replica.runtime` — Spark work on one worker thread, the scheduler, index
  and persist peeks; :mod:`.inputs` (persist shards and local arrangements as dataflow inputs),
  :mod:`.sinks` (materialized views via ``compare_and_append``), :mod:`.uppers` (shard upper
  watcher), :mod:`.persist_peek`, :mod:`.metrics`, :mod:`.render_api` (what it needs from
  ``spate.render``).

Tests and benchmarks drive a replica with :mod:`spate.testing.replica_driver`, check its
obligations with :mod:`spate.testing.replica_checks` and start one with
:mod:`spate.testing.replica_launch`.
"""

from __future__ import annotations

from spate.compute.replica.state import ReplicaState

__all__ = ["ReplicaState"]
