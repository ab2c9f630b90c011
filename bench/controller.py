"""Benchmark: the compute controller under frontier load, and its history under peek load.

1. **Frontier reports.** One instance, one replica, ``--collections`` (10,000) indexes over 10
   storage collections, each with ``lag_writes_by(1000, 1000)``. Every 100 ms of (simulated)
   time the replica reports new write/input/output frontiers for every index; storage uppers
   advance too, and the 1 s maintenance pass runs when due. Measured: controller CPU time per
   frontier update (applying the report, moving holds, emitting ``AllowCompaction`` and
   ``FrontierUpper``), and the latency of each ``process()`` call (which applies at most
   ``max_events_per_process`` replica events, so one call never blocks the loop for a whole
   round). The same run at a tenth of the collections shows the cost per update does not grow
   with the number of collections (a report is O(1), not O(collections)).
   Baseline, in the same run: decoding the same ``Frontiers`` messages with the wire codec —
   work the replica client must do for every report anyway. ``ratio`` = controller CPU per
   update / codec decode per update.
2. **History under peeks.** ``--peeks`` (100,000) peeks on one index, each answered by the
   replica: the history length afterwards (and its maximum along the way) must stay
   O(live objects), not O(peeks).

    python -m bench.controller [--collections N] [--rounds R] [--peeks P]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from bench._results import write_result
from spate.clock import ManualClock
from spate.codec import decode, encode
from spate.compute.controller import (
    ComputeController,
    ReplicaConfig,
    ReplicaConnected,
    ReplicaLocation,
    ReplicaResponse,
)
from spate.compute.controller.replica_client import EventSink
from spate.compute.controller.storage import StorageCollectionMetadata, StorageFrontiers
from spate.frontier import Antichain, ChangeBatch, MutableAntichain, ReadHold, ReadPolicy
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId, SeededIdGen, ShardId
from spate.plan.dataflow import DataflowDescription, IndexDesc, IndexExport, SourceImport
from spate.protocol.compute import (
    ComputeCommand,
    Frontiers,
    IndexTarget,
    PeekResponse,
    PeekRows,
)
from spate.repr import INT64, TEXT, RelationDesc

D = RelationDesc.of(("k", INT64, False), ("v", TEXT))
I1, R1 = InstanceId(1), ReplicaId(1)
CONFIG = ReplicaConfig(ReplicaLocation("127.0.0.1", 1))
ROUND_MS = 100


class Storage:
    """Minimal in-memory storage side: holds counted per collection, uppers set by the bench."""

    def __init__(self, ids: list[GlobalId]) -> None:
        gen = SeededIdGen(1)
        self.caps = {i: MutableAntichain([(0, 1)]) for i in ids}
        self.upper = dict.fromkeys(ids, Antichain.of(0))
        self.meta = {i: StorageCollectionMetadata(i, ShardId.new(gen), D) for i in ids}

    def acquire_read_holds(self, ids: list[GlobalId]) -> list[ReadHold]:
        out = []
        for i in ids:
            since = self.caps[i].frontier()
            self.caps[i].update_iter([(t, 1) for t in since])
            out.append(ReadHold(i, since, self._changes))
        return out

    def _changes(self, id: GlobalId, changes: ChangeBatch[int]) -> None:
        self.caps[id].update_iter(changes)

    def collection_frontiers(self, id: GlobalId) -> StorageFrontiers:
        return StorageFrontiers(self.caps[id].frontier(), self.upper[id])

    def collection_metadata(self, id: GlobalId) -> StorageCollectionMetadata:
        return self.meta[id]


class CountingReplica:
    def __init__(self) -> None:
        self.sent = 0
        self.last: ComputeCommand | None = None

    def send(self, command: ComputeCommand) -> None:
        self.sent += 1
        self.last = command

    def close(self) -> None:
        pass


class Connector:
    def __init__(self) -> None:
        self.replica = CountingReplica()

    def connect(
        self,
        instance: InstanceId,
        replica: ReplicaId,
        epoch: int,
        config: object,
        events: EventSink,
    ) -> CountingReplica:
        return self.replica


def setup(n: int) -> tuple[ComputeController, Storage, ManualClock, list[GlobalId], Connector]:
    sources = [GlobalId.user(i) for i in range(1, 11)]
    storage = Storage(sources)
    clock = ManualClock(0)
    connector = Connector()
    controller = ComputeController(
        storage, connector=connector, clock=clock, ids=SeededIdGen(2), hydration_concurrency=64
    )
    controller.create_instance(I1)
    controller.initialization_complete()
    controller.add_replica_to_instance(I1, R1, CONFIG)
    controller.handle_replica_event(ReplicaConnected(I1, R1, 1))
    indexes = [GlobalId.user(1000 + i) for i in range(n)]
    for i, idx in enumerate(indexes):
        s = sources[i % len(sources)]
        controller.create_dataflow(
            I1,
            DataflowDescription(
                source_imports=(SourceImport(s, D),),
                index_exports=(IndexExport(idx, IndexDesc(s, (0,)), D),),
                as_of=Antichain.of(0),
            ),
        )
    controller.set_read_policy(I1, [(i, ReadPolicy.lag_writes_by(1000, 1000)) for i in indexes])
    return controller, storage, clock, indexes, connector


def frontier_rounds(n: int, rounds: int) -> dict[str, float]:
    controller, storage, clock, indexes, connector = setup(n)
    # process() calls that applied replica events: wall time (noisy on a shared machine) and
    # CPU time of this thread; and the CPU time of the calls that ran the maintenance pass.
    latencies: list[float] = []
    cpu_latencies: list[float] = []
    maintenance: list[float] = []
    cpu = 0.0
    updates = 0
    responses = 0
    for r in range(1, rounds + 1):
        upper = Antichain.of(r * ROUND_MS)
        clock.advance(ROUND_MS)
        for s in storage.upper:
            storage.upper[s] = Antichain.of(r * ROUND_MS + 1)
        for idx in indexes:
            controller.handle_replica_event(
                ReplicaResponse(I1, R1, 1, Frontiers(idx, upper, upper, upper))
            )
        start_cpu = time.process_time()
        while True:
            pending = len(controller._inbox)
            due = clock.monotonic() >= controller._next_maintenance
            t0, c0 = time.perf_counter(), time.thread_time()
            resp = controller.process_now()
            elapsed, used = time.perf_counter() - t0, time.thread_time() - c0
            if due:
                maintenance.append(used)
            elif pending:
                latencies.append(elapsed)
                cpu_latencies.append(used)
            if resp is None and not controller._inbox:
                break
            responses += resp is not None
        while controller.process_now() is not None:  # drain the response queue
            responses += 1
        cpu += time.process_time() - start_cpu
        updates += n
    inst = controller._instances[I1]
    expected_since = Antichain.of(max(0, (rounds * ROUND_MS - 1000) // 1000 * 1000))
    assert all(inst.collections[i].since() == expected_since for i in indexes[:50])
    latencies.sort()
    cpu_latencies.sort()
    return {
        "collections": n,
        "updates": updates,
        "cpu_us_per_update": cpu / updates * 1e6,
        "cpu_ms_per_round": cpu / rounds * 1e3,
        "round_fits_in_100ms": cpu / rounds < ROUND_MS / 1000,
        "process_calls": len(latencies),
        "process_p50_ms": latencies[len(latencies) // 2] * 1e3,
        "process_p99_ms": latencies[int(len(latencies) * 0.99)] * 1e3,
        "process_max_ms": latencies[-1] * 1e3,
        "process_cpu_p50_ms": cpu_latencies[len(cpu_latencies) // 2] * 1e3,
        "process_cpu_p99_ms": cpu_latencies[int(len(cpu_latencies) * 0.99)] * 1e3,
        "process_cpu_max_ms": cpu_latencies[-1] * 1e3,
        "max_events_per_process": controller._max_events,
        "maintenance_passes": len(maintenance),
        "maintenance_first_cpu_ms": maintenance[0] * 1e3 if maintenance else 0.0,
        "maintenance_steady_max_cpu_ms": max(maintenance[1:], default=0.0) * 1e3,
        "commands_sent": connector.replica.sent,
        "responses": responses,
        "history_len": len(inst.history),
    }


def codec_baseline(n: int) -> float:
    """CPU µs to decode one Frontiers report from the wire."""
    frames = [
        encode(
            Frontiers(GlobalId.user(1000 + i), Antichain.of(5), Antichain.of(5), Antichain.of(5))
        )
        for i in range(n)
    ]
    start = time.process_time()
    for body in frames:
        decode(body, Frontiers)
    return (time.process_time() - start) / n * 1e6


async def peek_history(peeks: int) -> dict[str, float]:
    controller, _storage, _clock, indexes, _connector = setup(1)
    inst = controller._instances[I1]
    idx = indexes[0]
    answer = PeekRows(__import__("pyarrow").table({"k": [1], "v": ["x"], "_diff": [1]}))
    gen = SeededIdGen(5)
    longest = 0
    start = time.process_time()
    for _ in range(peeks):
        uuid = PeekId.new(gen)
        future = controller.peek(I1, IndexTarget(idx), uuid, 0, result_desc=D)
        controller.handle_replica_event(ReplicaResponse(I1, R1, 1, PeekResponse(uuid, answer)))
        controller.process_now()
        while controller.process_now() is not None:
            pass
        assert future.done()
        longest = max(longest, len(inst.history))
    cpu = time.process_time() - start
    return {
        "peeks": peeks,
        "history_len_after": len(inst.history),
        "history_len_max": longest,
        "cpu_us_per_peek": cpu / peeks * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--collections", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--peeks", type=int, default=100_000)
    args = ap.parse_args()

    load_at_start = os.getloadavg()
    small = frontier_rounds(args.collections // 10, args.rounds)
    big = frontier_rounds(args.collections, args.rounds)
    base = statistics.median(codec_baseline(args.collections) for _ in range(3))
    ratio = big["cpu_us_per_update"] / base
    scaling = big["cpu_us_per_update"] / small["cpu_us_per_update"]
    print(f"collections={args.collections:,} rounds={args.rounds} (one report per index per round)")
    print(
        f"controller: {big['cpu_us_per_update']:.1f} µs CPU per frontier update, "
        f"{big['cpu_ms_per_round']:.0f} ms per 100 ms round "
        f"({'fits' if big['round_fits_in_100ms'] else 'does NOT fit'})"
    )
    print(
        f"process() applying up to {big['max_events_per_process']} reports "
        f"({big['process_calls']:,} calls): CPU p50 {big['process_cpu_p50_ms']:.1f} ms, "
        f"p99 {big['process_cpu_p99_ms']:.1f} ms, max {big['process_cpu_max_ms']:.1f} ms; "
        f"wall p50 {big['process_p50_ms']:.1f} ms, p99 {big['process_p99_ms']:.1f} ms, "
        f"max {big['process_max_ms']:.1f} ms"
    )
    print(
        f"process() running the 1 s maintenance pass: CPU {big['maintenance_first_cpu_ms']:.0f} ms "
        f"the first time (schedules every dataflow), then at most "
        f"{big['maintenance_steady_max_cpu_ms']:.0f} ms"
    )
    print(f"baseline codec decode of a Frontiers report: {base:.1f} µs; ratio {ratio:.2f}")
    print(
        f"scaling: {small['collections']:,} -> {big['collections']:,} collections changes the "
        f"cost per update by x{scaling:.2f} (1.0 = O(1) per report)"
    )
    hist = asyncio.run(peek_history(args.peeks))
    print(
        f"history after {hist['peeks']:,} peeks: {hist['history_len_after']} commands "
        f"(max {hist['history_len_max']}); {hist['cpu_us_per_peek']:.0f} µs CPU per peek"
    )
    write_result(
        "controller",
        {
            "frontiers": big,
            "frontiers_small": small,
            "baseline_codec_decode_us": round(base, 2),
            "ratio_controller_to_decode": round(ratio, 2),
            "scaling_10x_collections": round(scaling, 2),
            "peeks": hist,
            "load_average_1m": round(os.getloadavg()[0], 1),
            "load_average_at_start": [round(x, 1) for x in load_at_start],
        },
    )


if __name__ == "__main__":
    main()
