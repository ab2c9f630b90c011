"""Exactly-once writer of a collection's changes into a Kafka topic.

Every interval ``[lower, upper)`` is **one Kafka transaction**: its records in the data topic
and a progress record (key: the sink's progress key, value ``{"upper": [u]}``) in the
progress topic. A consumer reading ``read_committed`` sees an interval entirely or not at all,
and the sink's frontier is the ``upper`` of its last committed progress record.

Opening the sink calls ``init_transactions`` with a transactional id derived from the progress
key: the broker aborts whatever transaction a previous incarnation left open and fences it
(its later writes fail), so at most one writer commits. The sink then reads its frontier back
from the progress topic, ``read_committed``, to the end. An interval that ends at or before the
frontier is skipped (a replay after a crash); one that starts elsewhere than the frontier would
leave a gap and is refused.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Final

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from spate.frontier.antichain import Antichain, Frontier
from spate.protocol.kafka import KafkaSinkConnection
from spate.repr.desc import RelationDesc
from spate.storage.sinks.interval import SinkError, SinkFenced, check_interval
from spate.storage.sinks.kafka.encode import Encoder
from spate.storage.sources.kafka import client

_TIMEOUT_S: Final = 60.0


class KafkaSink:
    """Writes one collection into ``connection.topic`` (see the module docs). Blocking."""

    def __init__(
        self,
        connection: KafkaSinkConnection,
        desc: RelationDesc,
        *,
        sink: str,
        progress_key: str,
        producer_settings: dict[str, object] | None = None,
    ) -> None:
        self._conn = connection
        self._desc = desc
        self._sink = sink
        self._key = progress_key
        try:
            self._encoder = Encoder(desc, connection.envelope, connection.key)
        except ValueError as e:
            raise SinkError(f"sink {sink}: {e}") from None
        self._settings = client.client_settings(connection.connection)
        self._ensure_topics()
        config: dict[str, object] = {
            **self._settings,
            "transactional.id": f"spate-sink-{progress_key}",
            "linger.ms": 5,
            **(producer_settings or {}),
        }
        self._producer = Producer(config)
        try:
            self._producer.init_transactions(_TIMEOUT_S)
        except KafkaException as e:
            raise SinkError(f"sink {sink}: cannot start Kafka transactions: {e}") from None
        self._upper = self._read_upper()
        self.records_written = 0

    @property
    def upper(self) -> Frontier:
        """The committed frontier (``{0}``: nothing committed)."""
        return self._upper

    def _ensure_topics(self) -> None:
        admin = AdminClient(dict(self._settings.items()))
        wanted = [NewTopic(self._conn.topic, 1, 1), NewTopic(self._conn.progress_topic, 1, 1)]
        existing = admin.list_topics(timeout=_TIMEOUT_S).topics
        missing = [t for t in wanted if t.topic not in existing]
        if not missing:
            return
        for topic, future in admin.create_topics(missing).items():
            try:
                future.result(timeout=_TIMEOUT_S)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise SinkError(
                        f"sink {self._sink}: cannot create topic {topic}: {e}"
                    ) from None

    def _read_upper(self) -> Frontier:
        """The ``upper`` of this sink's last committed progress record (``{0}`` if none).

        High watermarks can be stale, so the end is found with a marker: a transaction that
        writes a fresh nonce into the progress topic is committed first, and the topic is read
        (``read_committed``, in order: one partition) until the nonce comes back.
        """
        topic = self._conn.progress_topic
        nonce = uuid.uuid4().hex
        marker = f"{self._key}#open".encode()
        p = self._producer
        try:
            p.begin_transaction()
            p.produce(topic, key=marker, value=json.dumps({"nonce": nonce}).encode(), partition=0)
            p.commit_transaction(_TIMEOUT_S)
        except KafkaException as e:
            raise SinkError(f"sink {self._sink}: cannot mark the progress topic: {e}") from None
        consumer = client.consumer(self._conn.connection)
        upper: Frontier = Antichain.minimum()
        key = self._key.encode()
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + _TIMEOUT_S
            while True:
                # consume() waits out its timeout unless 1000 records come: keep it short.
                for m in consumer.consume(1000, timeout=0.05):
                    if m.error() is not None:
                        raise SinkError(f"sink {self._sink}: reading progress: {m.error()}")
                    if m.key() == key:
                        upper = _frontier(m.value())
                    elif m.key() == marker and nonce.encode() in (m.value() or b""):
                        return upper
                if time.monotonic() > deadline:
                    raise SinkError(
                        f"sink {self._sink}: could not read progress topic {topic!r} to its end"
                    )
        except KafkaException as e:
            raise SinkError(f"sink {self._sink}: reading progress: {e}") from None
        finally:
            consumer.close()

    def write(self, updates: pa.Table, *, lower: Frontier, upper: Frontier) -> None:
        """Commit the updates of ``[lower, upper)`` and the new frontier in one transaction."""
        if self._upper.is_empty() or (not upper.is_empty() and upper.less_equal(self._upper)):
            return  # already committed
        if lower != self._upper:
            raise SinkError(
                f"sink {self._sink}: interval [{lower}, {upper}) does not start at the "
                f"committed frontier {self._upper}"
            )
        table = check_interval(self._sink, self._desc, updates, lower=lower, upper=upper)
        records = self._encoder.records(table)
        p = self._producer
        try:
            p.begin_transaction()
            topic = self._conn.topic
            for key, value in records:
                try:
                    p.produce(topic, key=key, value=value)
                except BufferError:  # the local queue is full: wait for deliveries
                    _produce_waiting(p, topic, key, value)
            t = upper.as_option()
            progress = json.dumps({"upper": [] if t is None else [t]}).encode()
            _produce_waiting(p, self._conn.progress_topic, self._key.encode(), progress, 0)
            p.commit_transaction(_TIMEOUT_S)
        except KafkaException as e:
            err = e.args[0]
            if err.fatal() or err.code() == KafkaError._FENCED:
                raise SinkFenced(f"sink {self._sink}: fenced by a newer writer: {err}") from None
            if err.txn_requires_abort():
                with contextlib.suppress(KafkaException):
                    p.abort_transaction(_TIMEOUT_S)
            raise SinkError(f"sink {self._sink}: the transaction failed: {err}") from None
        self._upper = upper
        self.records_written += len(records)

    def close(self) -> None:
        self._producer.flush(5)


def _produce_waiting(
    p: Producer, topic: str, key: bytes | None, value: bytes | None, partition: int = -1
) -> None:
    """Produce one record, serving delivery reports while the local queue is full."""
    while True:
        try:
            p.produce(topic, key=key, value=value, partition=partition)
            return
        except BufferError:
            p.poll(0.1)


def _frontier(value: bytes | str | None) -> Frontier:
    try:
        doc = json.loads(value or b"")
        times = doc["upper"]
        if not isinstance(times, list) or not all(isinstance(t, int) for t in times):
            raise ValueError(times)
    except (ValueError, KeyError, TypeError):
        raise SinkError(f"a progress record that is not {{'upper': [t]}}: {value!r}") from None
    return Antichain.empty() if not times else Antichain.of(times[0])
