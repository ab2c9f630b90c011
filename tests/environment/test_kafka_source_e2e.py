"""End to end against a Tansu broker process: a JSON topic → ``CREATE SOURCE … FROM KAFKA`` →
a materialized view with a join and a top-k, with the storage replica killed (SIGKILL) while
it ingests. The view equals a recomputation from the topic's records, every record is ingested
exactly once, and undecodable records are counted in the errors subsource and kept out.

``SPATE_KAFKA_E2E_RECORDS`` sizes the topic (default 3000)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spate.environment.api import Environment
from spate.testing.kafka import TansuBroker, read_committed
from tests._env_sql import sql_rows, wait_rows
from tests._tansu import running_tansu

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

RECORDS = int(os.environ.get("SPATE_KAFKA_E2E_RECORDS", "3000"))
ITEMS = 20
CATEGORIES = 4


@pytest.fixture(scope="module")
def broker() -> Iterator[TansuBroker]:
    yield from running_tansu()


def _sql(env: Environment, text: str) -> list[dict[str, Any]]:
    return sql_rows(env, text)


def _wait(env: Environment, query: str, want: object, what: str, timeout: float = 180) -> None:
    wait_rows(env, query, want, what, timeout, every=0.5)


def test_json_topic_to_join_and_top_k_across_a_storage_replica_kill(
    tmp_path: Path, broker: TansuBroker
) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed={seed} records={RECORDS}")
    rng = random.Random(seed)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("clicks", 3, 1)]).values():
        f.result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    sent: list[dict[str, int]] = []
    bad = 0

    def produce(n: int) -> None:
        nonlocal bad
        for _ in range(n):
            if rng.random() < 0.01:
                producer.produce("clicks", value=b'{"user": "not a number"')
                bad += 1
                continue
            rec = {
                "user": rng.randrange(50),
                "item": rng.randrange(ITEMS),
                "amount": rng.randrange(1, 100),
            }
            sent.append(rec)
            producer.produce("clicks", value=json.dumps(rec).encode())
        assert producer.flush(30) == 0

    produce(RECORDS // 3)
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=["r1"])
        env.sql("CREATE TABLE items (item bigint NOT NULL, category text NOT NULL)")
        values = ", ".join(f"({i}, 'cat{i % CATEGORIES}')" for i in range(ITEMS))
        env.sql(f"INSERT INTO items VALUES {values}")
        env.sql(f"CREATE CONNECTION k TO KAFKA (BROKER '{broker.bootstrap}')")
        env.sql(
            "CREATE SOURCE clicks (user bigint NOT NULL, item bigint NOT NULL, amount bigint NOT NULL) "
            "FROM KAFKA CONNECTION k (TOPIC 'clicks') FORMAT JSON INCLUDE PARTITION, OFFSET"
        )
        env.sql(
            "CREATE MATERIALIZED VIEW top_items IN CLUSTER c AS "
            "SELECT i.category, c.item, sum(c.amount) AS total, count(*) AS n "
            "FROM clicks_data c JOIN items i ON c.item = i.item "
            "GROUP BY i.category, c.item ORDER BY total DESC, c.item LIMIT 5"
        )
        env.sql(
            "CREATE SINK top_upsert FROM top_items INTO KAFKA CONNECTION k (TOPIC 'top_upsert') "
            "KEY (item) FORMAT JSON ENVELOPE UPSERT"
        )
        env.sql(
            "CREATE SINK top_changes FROM top_items INTO KAFKA CONNECTION k "
            "(TOPIC 'top_changes') FORMAT JSON ENVELOPE DEBEZIUM"
        )
        produce(RECORDS // 3)
        # Kill the storage replica while it ingests and sinks; the orchestrator restarts it.
        pid = env.runtime.orchestrator.pid("storage-r0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        produce(RECORDS - 2 * (RECORDS // 3))

        totals: Counter[int] = Counter()
        counts: Counter[int] = Counter()
        for r in sent:
            totals[r["item"]] += r["amount"]
            counts[r["item"]] += 1
        ranked = sorted(totals, key=lambda i: (-totals[i], i))[:5]
        want = [
            {"category": f"cat{i % CATEGORIES}", "item": i, "total": totals[i], "n": counts[i]}
            for i in ranked
        ]
        _wait(
            env,
            "SELECT count(*) AS n FROM clicks_data",
            [{"n": len(sent)}],
            "records ingested",
        )
        rows = env.select("top_items", timeout=600).to_pylist()  # Spark may be slow to catch up
        got = sorted(rows, key=lambda r: (-r["total"], r["item"]))
        assert got == want
        # Every (partition, offset) exactly once.
        dupes = _sql(
            env,
            'SELECT partition, "offset", count(*) AS n FROM clicks_data '
            'GROUP BY partition, "offset" HAVING count(*) > 1',
        )
        assert dupes == []
        _wait(env, "SELECT count(*) AS n FROM clicks_errors", [{"n": bad}], "errors counted")
        # The sinks' topics, read_committed, hold each change once: folded, they are the view.
        # sum(bigint) is numeric, as in PostgreSQL: a sink writes numeric as JSON text.
        want_rows = Counter(tuple(sorted({**r, "total": str(r["total"])}.items())) for r in want)
        deadline = time.monotonic() + 180
        while True:
            upsert: dict[bytes | None, dict[str, Any]] = {}
            for key, value in read_committed(broker.bootstrap, "top_upsert"):
                if value is None:
                    upsert.pop(key, None)
                else:
                    upsert[key] = json.loads(value)
            changes: Counter[tuple[tuple[str, Any], ...]] = Counter()
            for _, value in read_committed(broker.bootstrap, "top_changes"):
                doc = json.loads(value or b"")
                if doc["before"] is not None:
                    changes[tuple(sorted(doc["before"].items()))] -= 1
                if doc["after"] is not None:
                    changes[tuple(sorted(doc["after"].items()))] += 1
            changes = Counter({k: v for k, v in changes.items() if v})
            got_upsert = Counter(tuple(sorted(r.items())) for r in upsert.values())
            if got_upsert == want_rows and changes == want_rows:
                break
            assert time.monotonic() < deadline, f"sinks: {got_upsert} / {changes} != {want_rows}"
            time.sleep(1)
