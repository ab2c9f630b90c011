"""The UPSERT Kafka source's key state on disk against the same state in a Python dict.

``python -m bench.upsert_state [--records N] [--keys K] [--repeats R]``: ``N`` records of ``K``
text keys (JSON values of two declared columns, a tenth of them tombstones) decoded by the
UPSERT envelope 10,000 at a time, committing after each batch (as a bound chunk does): once with
the source's on-disk state (SQLite, :mod:`spate.storage.sources.kafka.upsert_state`) and once
with a dict holding every key in memory (what the state was), alternating, ``R`` times. Reports
the median records/s of each, the median of the per-repeat ratios (on disk over in memory, so
below 1 is the cost of the disk), the most keys the on-disk state held in Python at once against
the keys it holds, and the 1-minute load average. Writes ``bench/results/upsert_state.json``.
No Kafka broker: the records are made in memory, so only the envelope and its state are timed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Collection, Mapping
from typing import Any

from bench._results import write_result
from spate.protocol.kafka import KafkaEnvelope, KafkaFormat, KafkaSource, kafka_client_settings
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT
from spate.storage.sources.kafka.envelope import Envelope, Record
from spate.storage.sources.kafka.upsert_state import Held

_BATCH = 10_000


class _InMemory:
    """The baseline: every key's entry in a dict (no transaction to undo)."""

    def __init__(self) -> None:
        self.held: dict[bytes, Held] = {}
        self.max_resident = 0

    def get_many(self, keys: Collection[bytes]) -> dict[bytes, Held]:
        return {k: self.held[k] for k in keys if k in self.held}

    def write(self, changes: Mapping[bytes, Held | None]) -> None:
        for k, h in changes.items():
            if h is None:
                self.held.pop(k, None)
            else:
                self.held[k] = h

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


def _records(n: int, keys: int) -> list[Record]:
    rng = random.Random(7)
    out = []
    for i in range(n):
        k = rng.randrange(keys)
        value = None if rng.random() < 0.1 else json.dumps({"id": k, "name": f"n{i}"}).encode()
        out.append(Record(0, i, str(k).encode(), value))
    return out


def _source() -> KafkaSource:
    return KafkaSource(
        kafka_client_settings("127.0.0.1:9"),
        "t",
        KafkaFormat.JSON,
        key_format=KafkaFormat.TEXT,
        envelope=KafkaEnvelope.UPSERT,
        value_desc=RelationDesc.of(("id", INT64, False), ("name", TEXT)),
    )


def _run(records: list[Record], on_disk: bool) -> tuple[float, int, int]:
    """Records/s, the most keys held in Python at once, and the keys held at the end."""
    envelope = Envelope(_source())
    state: Any = envelope.state
    if not on_disk:
        state.close()
        state = _InMemory()
        envelope.state = state
    start = time.perf_counter()
    for i in range(0, len(records), _BATCH):
        envelope.apply(records[i : i + _BATCH])
        state.commit()
    elapsed = time.perf_counter() - start
    held = len(state) if on_disk else len(state.held)
    resident = state.max_resident if on_disk else held
    envelope.close()
    return len(records) / elapsed, resident, held


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    records = _records(args.records, args.keys)
    memory: list[float] = []
    disk: list[float] = []
    resident = held = 0
    for _ in range(args.repeats):
        memory.append(_run(records, on_disk=False)[0])
        rate, resident, held = _run(records, on_disk=True)
        disk.append(rate)
    ratios = [d / m for d, m in zip(disk, memory, strict=True)]
    figures = {
        "records": args.records,
        "keys": args.keys,
        "batch": _BATCH,
        "in_memory_records_per_s": round(statistics.median(memory)),
        "on_disk_records_per_s": round(statistics.median(disk)),
        "on_disk_over_in_memory": round(statistics.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
        "on_disk_max_keys_in_python": resident,
        "keys_held": held,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(figures, indent=2))
    write_result("upsert_state", figures)


if __name__ == "__main__":
    main()
