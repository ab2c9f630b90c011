"""The Kafka part of ``bench/storage.py`` (``--only kafka``), against a Tansu broker process.

* **Kafka ingest rows/s**: a JSON topic (declared columns) read by the Kafka source into persist
  through the ingestion runner (poll, bind offsets, append), against a bare confluent-kafka
  consumer reading the same records (no decoding, no persist).
* **Kafka sink rows/s**: a persist collection written by the sink runner (JSON, UPSERT, one
  transaction per interval), against a bare idempotent producer producing the same number of
  JSON records (flush at the end).

* **Kafka catch-up** (``--kafka-catchup-rows N``, off by default): a backlog of ``N`` records
  taken in by the ingestion runner paced as the storage replica paces it (a step, then the
  timestamp interval, 1 s), against a bare consumer reading the same backlog; shows what the
  read budget growing while behind and the read-ahead between steps give a source that is
  behind.

Each is measured ``repeats`` times (``--kafka-repeats``), baseline and spate alternating; the
rates are medians and each ratio is the median of the per-repeat ratios (listed too), so a
burst of load from other processes on a shared machine moves one repeat, not the figure. The
ingest also reports its CPU ratio (the process's CPU seconds, librdkafka's threads included, of
the bare consumer over spate's): on a machine shared with other work it moves much less than
the wall-clock ratio, which waits for the CPU as well.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from spate.clock import SystemClock
from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId, SystemIdGen
from spate.persist.client import PersistClient
from spate.protocol.kafka import (
    KafkaFormat,
    KafkaSinkConnection,
    KafkaSinkEnvelope,
    KafkaSource,
    kafka_client_settings,
)
from spate.protocol.storage_desc import (
    CollectionMetadata,
    IngestionDescription,
    SinkDescription,
    SourceExport,
)
from spate.repr.desc import RelationDesc
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.replica.sink import SinkRunner
from spate.storage.sources.kafka.reader import KAFKA_PROGRESS_DESC, KafkaReader
from spate.testing.kafka import TansuBroker, tansu_binary


def bench_kafka(
    client: PersistClient,
    rows: int,
    desc: RelationDesc,
    sink_shard: ShardId,
    repeats: int = 3,
    catch_up_rows: int = 0,
) -> dict[str, Any]:
    binary = tansu_binary()
    if binary is None:
        return {"skipped": "no Tansu broker binary"}
    broker = TansuBroker(binary)
    broker.start()
    try:
        out = _bench(broker.bootstrap, client, rows, desc, sink_shard, repeats)
        if catch_up_rows:
            out["catch_up"] = _catch_up_figures(broker.bootstrap, client, catch_up_rows, desc)
        return out
    finally:
        broker.kill()


def _produce_json(bootstrap: str, topic: str, rows: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000})
    for i in range(rows):
        while True:
            try:
                p.produce(topic, value=json.dumps({"k": i, "v": f"value-{i}", "n": i * 3}).encode())
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(120) == 0


def _catch_up_figures(
    bootstrap: str, client: PersistClient, rows: int, desc: RelationDesc
) -> dict[str, Any]:
    topic = "bench_backlog"
    _produce_json(bootstrap, topic, rows)
    bare = _bare_consumer(bootstrap, topic, rows)
    paced, steps = _ingest_paced(bootstrap, client, topic, rows, desc, interval_s=1.0)
    return {
        "rows": rows,
        "seconds": round(paced, 2),
        "steps": steps,
        "bare_consumer_seconds": round(bare, 2),
        "ratio": round(bare / paced, 3),
    }


def _bench(
    bootstrap: str,
    client: PersistClient,
    rows: int,
    desc: RelationDesc,
    sink_shard: ShardId,
    repeats: int,
) -> dict[str, Any]:
    topic = "bench_in"
    _produce_json(bootstrap, topic, rows)
    out: dict[str, Any] = {"rows": rows, "repeats": repeats}
    import pandas  # noqa: F401  (a one-time import the replica has long done: not timed)

    # Each measurement runs ``repeats`` times, the baseline and spate alternating, so that a
    # burst of load on a shared machine does not fall on one side only; the figures are medians.
    ingest: list[tuple[float, float]] = []
    ingest_cpu: list[tuple[float, float]] = []
    sink: list[tuple[float, float]] = []
    for r in range(repeats):
        cpu0 = time.process_time()
        bare = _bare_consumer(bootstrap, topic, rows)
        cpu1 = time.process_time()
        ours = _ingest(bootstrap, client, topic, rows, desc)
        ingest.append((bare, ours))
        ingest_cpu.append((cpu1 - cpu0, time.process_time() - cpu1))
        out_topic = f"bench_out_{uuid.uuid4().hex[:6]}"
        sink.append(
            (
                _bare_producer(bootstrap, out_topic + "_bare", rows),
                _sink(bootstrap, client, out_topic, desc, sink_shard, GlobalId.user(5 + r)),
            )
        )
    base_s, ingest_s = _medians(ingest)
    out["ingest_rows_per_s"] = round(rows / ingest_s)
    out["bare_consumer_rows_per_s"] = round(rows / base_s)
    out["ingest_ratio"] = round(statistics.median(b / i for b, i in ingest), 3)
    out["ingest_ratios"] = [round(b / i, 3) for b, i in ingest]
    out["ingest_cpu_ratio"] = round(statistics.median(b / i for b, i in ingest_cpu), 3)
    out["ingest_cpu_ratios"] = [round(b / i, 3) for b, i in ingest_cpu]
    bare_s, sink_s = _medians(sink)
    out["sink_rows_per_s"] = round(rows / sink_s)
    out["bare_producer_rows_per_s"] = round(rows / bare_s)
    out["sink_ratio"] = round(statistics.median(b / k for b, k in sink), 3)
    out["sink_ratios"] = [round(b / k, 3) for b, k in sink]
    return out


def _medians(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def _bare_consumer(bootstrap: str, topic: str, rows: int) -> float:
    """Seconds for a bare consumer to read ``rows`` records (no decoding, no persist), from
    its creation (spate's time includes creating its consumers too)."""
    start = time.perf_counter()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    while seen < rows:
        for m in c.consume(10_000, timeout=1):
            assert m.error() is None
            seen += 1
    took = time.perf_counter() - start
    c.close()
    return took


def _ingest(
    bootstrap: str, client: PersistClient, topic: str, rows: int, desc: RelationDesc
) -> float:
    """Seconds for the ingestion runner with the Kafka source to commit ``rows`` records."""
    return _ingest_paced(bootstrap, client, topic, rows, desc, interval_s=0.0)[0]


def _ingest_paced(
    bootstrap: str,
    client: PersistClient,
    topic: str,
    rows: int,
    desc: RelationDesc,
    *,
    interval_s: float,
) -> tuple[float, int]:
    """Seconds (and steps) for the ingestion runner with the Kafka source to commit ``rows``
    records, waiting ``interval_s`` after each step that leaves some to go."""
    ids = SystemIdGen()
    source = KafkaSource(kafka_client_settings(bootstrap), topic, KafkaFormat.JSON, value_desc=desc)
    reader = KafkaReader(source)
    data_desc = reader.outputs["data"]
    description = IngestionDescription(
        source,
        (
            SourceExport(GlobalId.user(2), "data", ShardId.new(ids), data_desc),
            SourceExport(GlobalId.user(3), "errors", ShardId.new(ids), reader.outputs["errors"]),
        ),
        CollectionMetadata(GlobalId.user(1), ShardId.new(ids), KAFKA_PROGRESS_DESC),
    )
    runner = IngestionRunner(
        GlobalId.user(1), description, reader=reader, persist=client, clock=SystemClock(), ids=ids
    )
    start = time.perf_counter()
    runner.rehydrate()
    steps = 0
    while runner.counters.updates_committed < rows:
        runner.step()
        steps += 1
        if interval_s and runner.counters.updates_committed < rows:
            time.sleep(interval_s)
    took = time.perf_counter() - start
    reader.close()
    return took, steps


def _sink(
    bootstrap: str,
    client: PersistClient,
    out_topic: str,
    desc: RelationDesc,
    sink_shard: ShardId,
    sink_id: GlobalId,
) -> float:
    """Seconds for the sink runner (JSON, UPSERT, one transaction per interval) to write the
    collection into a new topic."""
    conn = KafkaSinkConnection(
        kafka_client_settings(bootstrap), out_topic, KafkaSinkEnvelope.UPSERT, ("k",)
    )
    d = SinkDescription(GlobalId.user(1), sink_shard, desc, conn, Antichain.of(0))
    sink = SinkRunner(sink_id, d, persist=client)
    start = time.perf_counter()
    while sink.upper != Antichain.of(10):
        sink.step()
    took = time.perf_counter() - start
    sink.close()
    return took


def _bare_producer(bootstrap: str, topic: str, rows: int) -> float:
    """Seconds for a bare idempotent producer to produce the same records (flush at the end)."""
    bare = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    start = time.perf_counter()
    for i in range(rows):
        while True:
            try:
                bare.produce(
                    topic,
                    key=json.dumps({"k": i}).encode(),
                    value=json.dumps({"k": i, "v": f"value-{i}", "n": i * 3}).encode(),
                )
                break
            except BufferError:
                bare.poll(0.1)
    assert bare.flush(120) == 0
    return time.perf_counter() - start


def run(
    work: Path,
    rows: int,
    desc: RelationDesc,
    sink_input: Any,
    persist: Any,
    repeats: int = 3,
    catch_up_rows: int = 0,
) -> dict[str, Any]:
    client = persist(work / "kafka")
    shard, _ = sink_input(client, rows)
    try:
        return bench_kafka(client, rows, desc, shard, repeats, catch_up_rows)
    finally:
        client.close()
