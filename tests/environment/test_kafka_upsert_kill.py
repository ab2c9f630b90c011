"""An ``ENVELOPE UPSERT`` Kafka source with the storage replica killed (SIGKILL) while it
ingests updates, deletes and bad values of old keys: the restarted replica restores the key
state from the source's outputs in persist (its log says so, and that it did not read the topic
again from its start), and the source's relations end equal to a recomputation over every
record produced.

``SPATE_KAFKA_UPSERT_RECORDS`` sizes each of the three batches (default 600)."""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spate.environment.api import Environment
from spate.testing.kafka import TansuBroker
from tests._env_sql import wait_rows
from tests._tansu import running_tansu

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

RECORDS = int(os.environ.get("SPATE_KAFKA_UPSERT_RECORDS", "600"))
KEYS = 80


@pytest.fixture(scope="module")
def broker() -> Iterator[TansuBroker]:
    yield from running_tansu()


class Upserts:
    """Produces records of ``KEYS`` text keys and keeps what each key holds now."""

    def __init__(self, bootstrap: str, rng: random.Random) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.rng = rng
        self.held: dict[str, int | None] = {}  # key -> value, None: an error

    def batch(self, n: int) -> None:
        for _ in range(n):
            key = f"k{self.rng.randrange(KEYS)}"
            x = self.rng.random()
            if x < 0.15:
                self.held.pop(key, None)
                self.producer.produce("prices", key=key.encode(), value=None)
            elif x < 0.22:
                self.held[key] = None
                self.producer.produce("prices", key=key.encode(), value=b'{"v": ')
            else:
                v = self.rng.randrange(1_000_000)
                self.held[key] = v
                self.producer.produce("prices", key=key.encode(), value=json.dumps({"v": v}))
        assert self.producer.flush(30) == 0


def test_upsert_source_across_a_storage_replica_kill(tmp_path: Path, broker: TansuBroker) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed={seed} records={RECORDS}")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("prices", 2, 1)]).values():
        f.result(timeout=30)
    up = Upserts(broker.bootstrap, random.Random(seed))
    data = tmp_path / "data"

    def wait_for_model(env: Environment) -> None:
        want = [{"key": k, "v": v} for k, v in sorted(up.held.items()) if v is not None]
        wait_rows(env, "SELECT key, v FROM prices_data ORDER BY key", want, "data", 300, every=0.5)
        bad = [{"key": k.encode()} for k, v in sorted(up.held.items()) if v is None]
        wait_rows(env, "SELECT key FROM prices_errors ORDER BY key", bad, "errors", 60, every=0.5)

    up.batch(RECORDS)
    with Environment.open(data) as env:
        env.sql(f"CREATE CONNECTION k TO KAFKA (BROKER '{broker.bootstrap}')")
        env.sql(
            "CREATE SOURCE prices (v bigint NOT NULL) FROM KAFKA CONNECTION k (TOPIC 'prices') "
            "KEY FORMAT TEXT VALUE FORMAT JSON ENVELOPE UPSERT"
        )
        wait_for_model(env)
        up.batch(RECORDS)
        # Kill the storage replica while it ingests the second batch; the orchestrator
        # restarts it.
        pid = env.runtime.orchestrator.pid("storage-r0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        up.batch(RECORDS)
        wait_for_model(env)
    logs = "".join(p.read_text(errors="replace") for p in data.rglob("service.log"))
    assert "source state restored from its outputs" in logs
    assert "rebuilding the UPSERT state by reading the topic" not in logs
