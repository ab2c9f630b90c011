"""The Kafka source's reader: a topic's partitions, read from the offsets bound in persist.

The resume point is the *next offset of every partition* read so far, as a sorted tuple of
``(partition, offset)``; a partition missing from it starts at the source's start offset.
Points are ordered partition-wise, and recorded as progress rows ``(partition, offset)``.

Determinism (see :mod:`spate.storage.sources.source`): a Kafka partition is an immutable log,
so the records of ``[lower, upper)`` are the same on every read. A chunk decodes its records in
``(partition, offset)`` order, so :meth:`KafkaReader.replay` derives exactly the updates
:meth:`KafkaReader.poll` derived. An UPSERT source's state (what each key holds) is that of
its ``lower``; when a call starts from another point than the state's, the state is rebuilt
from the source's outputs (see below). A key MUST stay in one partition (Kafka's default
partitioner keeps it there).

The UPSERT state is on local disk (:mod:`~spate.storage.sources.kafka.upsert_state`), changed
in a transaction that :meth:`KafkaReader.committed` commits: a poll or replay from the
committed point (the chunk after it was not bound) undoes what was not committed, and one from
where the uncommitted changes end goes on. A new reader (a restarted storage replica) or one
whose ingestion moved elsewhere (another writer bound further) is brought to its point by
:meth:`KafkaReader.restore` from the ``data`` and ``errors`` outputs' contents in persist at
that point: the state is a function of them (as Materialize rebuilds its upsert state from the
output shard), so nothing is read again from Kafka. Only when no outputs are given (they are
not both exported, or no longer readable there) is the state rebuilt by reading the topic from
the start up to the point; ``records_reread`` counts the records that took.

Records are read ``read_committed``: records of aborted transactions are never ingested.
Partitions added to the topic are found within ``discovery_interval_ms`` and read from their
start. Offsets are never committed to the broker; the group id is only a name.

A chunk of a source that :class:`~spate.storage.sources.kafka.json_batch.JsonBatch` serves
(``ENVELOPE NONE``, declared JSON columns) is decoded in one batch when it can be, and record by
record otherwise; both give the same table, so :meth:`KafkaReader.replay` stays exact.

A poll that ends behind (records still waiting) reads ahead from its upper in a thread while
the caller writes the chunk; only a poll from exactly that upper takes what it read (any other
poll reassigns the consumer and reads from its own point), so every chunk is still exactly the
records of ``[lower, upper)``.
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from spate.protocol.kafka import KafkaSource
from spate.repr.arrow import rows_to_table, table_to_rows
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import INT64, Row
from spate.storage.sources.kafka import client
from spate.storage.sources.kafka.envelope import DATA, ERRORS, Envelope, Record, outputs
from spate.storage.sources.kafka.json_batch import JsonBatch
from spate.storage.sources.source import SourceChunk, SourceError, SourceUnavailable

_log: Final = logging.getLogger("spate.storage.kafka")
KAFKA_PROGRESS_DESC: Final = RelationDesc.of(("partition", INT64, False), ("offset", INT64, False))
KafkaPoint = tuple[tuple[int, int], ...]
_BATCH: Final = 10_000


class KafkaReader:
    """A running Kafka source (blocking calls: run it off the event loop).

    ``max_records_per_poll`` bounds one chunk; a poll reads for at most its budget, and ends
    once every partition is at its high watermark (it has caught up: the caller paces polls).
    The budget is ``poll_budget_s`` after a poll that caught up; after one that did not (the
    source is behind) it doubles, up to ``max_poll_budget_s``: a source catching up writes
    fewer, bigger chunks to persist, and one that keeps up stays as fresh as before.
    ``consumer``: how to make a consumer (tests inject settings); default from the source's
    connection. ``state_dir``: where the UPSERT state's directory is made (default: the
    system's temporary directory).
    """

    def __init__(
        self,
        source: KafkaSource,
        *,
        max_records_per_poll: int = 200_000,
        poll_budget_s: float = 0.5,
        max_poll_budget_s: float = 2.0,
        idle_s: float = 0.05,
        discovery_interval_ms: int = 1000,
        replay_timeout_s: float = 60.0,
        consumer: Callable[[], Consumer] | None = None,
        state_dir: str | None = None,
    ) -> None:
        if max_records_per_poll < 1:
            raise SourceError("Kafka source: max_records_per_poll must be >= 1")
        self._source = source
        self._outputs = outputs(source)
        self._envelope = Envelope(source, state_dir=state_dir)
        self._max = max_records_per_poll
        self._budget = poll_budget_s
        self._max_budget = max(poll_budget_s, max_poll_budget_s)
        self._budget_now = poll_budget_s  # this poll's: grows while the source is behind
        self._idle = idle_s
        self._discovery_ms = discovery_interval_ms
        self._replay_timeout = replay_timeout_s
        self._make = consumer or (lambda: client.consumer(source.connection))
        self._live: Consumer | None = None
        self._metadata: Consumer | None = None  # for partition discovery only (never assigned)
        self._at: KafkaPoint | None = None  # where the live consumer's stream continues
        self._partitions: tuple[int, ...] = ()
        self._discovered_at: int | None = None
        self._state_at: KafkaPoint = ()  # the point of the UPSERT state's committed contents
        self._pending_at: KafkaPoint | None = None  # where its uncommitted changes end
        self.records_reread = 0  # records read again to rebuild the UPSERT state
        self._batch = JsonBatch.for_source(source, self._outputs[DATA])
        self._ahead: tuple[_Reading, threading.Event, threading.Thread] | None = None

    # -- points ---------------------------------------------------------------------------------

    @property
    def outputs(self) -> Mapping[str, RelationDesc]:
        return self._outputs

    @property
    def progress_desc(self) -> RelationDesc:
        return KAFKA_PROGRESS_DESC

    @property
    def poll_budget_s(self) -> float:
        """The next poll's budget (see the class docs)."""
        return self._budget_now

    def minimum(self) -> KafkaPoint:
        return ()

    def less_equal(self, a: KafkaPoint, b: KafkaPoint) -> bool:
        bs = dict(b)
        s = self._source
        return all(o <= bs.get(p, s.start_offset(p)) for p, o in a)

    def progress_rows(self, point: KafkaPoint) -> list[Row]:
        return [(p, o) for p, o in point]

    def point_from_rows(self, rows: Sequence[Row]) -> KafkaPoint:
        out: dict[int, int] = {}
        for row in rows:
            if (
                len(row) != 2
                or not isinstance(row[0], int)
                or not isinstance(row[1], int)
                or row[0] in out
            ):
                raise SourceError(
                    f"Kafka source progress rows are (partition, offset), got {rows!r}"
                )
            out[row[0]] = row[1]
        return tuple(sorted(out.items()))

    # -- reading --------------------------------------------------------------------------------

    def poll(self, lower: KafkaPoint, *, now_millis: int) -> SourceChunk[KafkaPoint] | None:
        self._state_to(lower)
        reading = self._take_ahead(lower) or _Reading.at(lower, self._batch is not None)
        consumer = self._consumer_at(reading.point(), now_millis)
        self._read(consumer, reading, time.monotonic() + self._budget_now)
        records = reading.records
        grow = reading.behind and records  # not for a poll that read nothing (no fetch yet)
        self._budget_now = min(2 * self._budget_now, self._max_budget) if grow else self._budget
        if not records:
            return None
        upper = reading.point()
        if reading.decoded is not None:
            pieces = [t for p in sorted(reading.decoded) for t in reading.decoded[p]]
            chunk = SourceChunk(upper, {DATA: pa.concat_tables(pieces)})
        else:
            chunk = self._chunk(records, upper)
        self._at = upper
        self._advanced(upper)
        if reading.behind:
            self._start_ahead(consumer, upper)
        return chunk

    def _read(
        self,
        consumer: Consumer,
        r: _Reading,
        deadline: float,
        stop: threading.Event | None = None,
    ) -> None:
        """Consume into ``r`` until caught up, ``max_records_per_poll``, ``deadline`` or
        ``stop``. With a batch decoder, each consumed batch is decoded as it comes (per
        partition), while librdkafka fetches the next: a poll's tail is only a concatenation.
        A value the batch decoder leaves sends the whole chunk through ``_chunk`` (which gives
        the same table: see JsonBatch)."""
        start = self._source.start_offset
        next_offset = r.next_offset
        while len(r.records) < self._max and (stop is None or not stop.is_set()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            want = min(_BATCH, self._max - len(r.records))
            # The chunk ends once the partitions' high watermarks (as of the last fetch, no
            # broker request) say nothing more is there, not while the first fetch is still
            # under way; a full batch may end exactly there too, so it is asked after every
            # batch rather than after an idle wait.
            batch = consumer.consume(want, timeout=min(remaining, self._idle))
            if not batch:
                if self._caught_up(consumer):
                    r.behind = False
                    break
                continue
            caught_up = self._caught_up(consumer)
            r.behind = not caught_up
            if _fresh_run(batch, next_offset, start):
                kept = batch  # the common case, checked in bulk
            else:
                kept = []
                for m in batch:
                    if m.error() is not None:
                        self._check(m)
                    p, o = m.partition(), m.offset()
                    assert p is not None and o is not None
                    at = next_offset.get(p)
                    if o < (start(p) if at is None else at):
                        continue  # already read (a stale fetch): never twice
                    kept.append(m)
                    next_offset[p] = o + 1
            r.records += kept
            if r.decoded is not None and kept:
                r.decoded = self._decode_runs(r.decoded, kept)
            if caught_up:
                break

    # -- reading ahead --------------------------------------------------------------------------

    def _start_ahead(self, consumer: Consumer, point: KafkaPoint) -> None:
        """Go on reading from ``point`` in a thread of its own while the caller writes the
        chunk that ends there (a source that is behind): the next poll from ``point`` starts
        with what it read. Only reads; the consumer is the thread's until it is taken."""
        reading = _Reading.at(point, self._batch is not None)
        stop = threading.Event()
        deadline = time.monotonic() + self._budget_now

        def run() -> None:
            try:
                self._read(consumer, reading, deadline, stop)
            except BaseException as e:  # the next poll reads again from its point
                reading.failed = e

        thread = threading.Thread(target=run, name="spate-kafka-read-ahead", daemon=True)
        self._ahead = (reading, stop, thread)
        thread.start()

    def _take_ahead(self, lower: KafkaPoint) -> _Reading | None:
        """Stop reading ahead; what it read if it started at ``lower`` and did not fail (the
        live consumer's stream then continues where it stopped), else ``None`` (the consumer
        is reassigned before it reads again)."""
        if self._ahead is None:
            return None
        reading, stop, thread = self._ahead
        self._ahead = None
        stop.set()
        thread.join()
        if reading.failed is not None or reading.lower != lower:
            self._at = None
            return None
        self._at = reading.point()
        return reading

    def replay(self, lower: KafkaPoint, upper: KafkaPoint) -> SourceChunk[KafkaPoint]:
        if not self.less_equal(lower, upper):
            raise SourceError(f"Kafka source: replay bounds {lower} and {upper} are not ordered")
        self._state_to(lower)
        chunk = self._chunk(self._read_range(lower, upper), upper)
        self._advanced(upper)
        return chunk

    def committed(self, point: KafkaPoint) -> None:
        """The UPSERT state's changes up to ``point`` are kept (see the module docs)."""
        state = self._envelope.state
        if state is not None and self._pending_at is not None and self._pending_at == point:
            state.commit()
            self._state_at = point
            self._pending_at = None

    def needs_outputs(self, point: KafkaPoint) -> bool:
        """Whether going on from ``point`` needs :meth:`restore` (an UPSERT state elsewhere)."""
        return (
            self._envelope.restorable
            and point != self._state_at
            and point != self._pending_at
            and point != self.minimum()
        )

    def restore(self, point: KafkaPoint, outputs: Mapping[str, pa.Table]) -> bool:
        """Make the UPSERT state the one of ``point`` from the contents of the source's
        outputs there (tables of data columns and ``_diff``, every diff 1); ``False`` (nothing
        changed) when an output is missing or the state cannot be rebuilt from them."""
        state = self._envelope.state
        if not self._envelope.restorable or DATA not in outputs or ERRORS not in outputs:
            return False
        assert state is not None
        for name in (DATA, ERRORS):
            diffs = outputs[name].column(DIFF_COLUMN)
            if len(diffs) and (pc.min(diffs).as_py() != 1 or pc.max(diffs).as_py() != 1):
                raise SourceError(
                    f"Kafka source: the {name} output holds a row other than once: it is not "
                    "an UPSERT source's"
                )
        state.rollback()
        self._pending_at = None
        try:
            self._envelope.restore(
                _rows(outputs[DATA], self._outputs[DATA]),
                _rows(outputs[ERRORS], self._outputs[ERRORS]),
            )
        except BaseException:
            state.rollback()
            raise
        state.commit()
        self._state_at = point
        return True

    def close(self) -> None:
        self._envelope.close()
        self._take_ahead(())
        if self._live is not None:
            self._live.close()
            self._live = None
        if self._metadata is not None:
            self._metadata.close()
            self._metadata = None
        self._at = None

    # -- internals ------------------------------------------------------------------------------

    def _chunk(self, messages: list[Message], upper: KafkaPoint) -> SourceChunk[KafkaPoint]:
        """The updates of ``messages``, decoded in ``(partition, offset)`` order."""
        partitions = [m.partition() for m in messages]
        if partitions and partitions.count(partitions[0]) != len(partitions):
            messages.sort(key=lambda m: (m.partition(), m.offset()))
            partitions = [m.partition() for m in messages]
        if self._batch is not None:

            def metadata(name: str) -> list[int]:
                column = partitions if name == "partition" else [m.offset() for m in messages]
                return column  # type: ignore[return-value]  # set on every consumed record

            table = self._batch.decode([m.value() for m in messages], metadata)
            if table is not None:
                return SourceChunk(upper, {DATA: table})
        updates = self._envelope.apply([_record(m) for m in messages])
        tables = {}
        for name, ups in ((DATA, updates.data), (ERRORS, updates.errors)):
            if ups:
                desc = self._outputs[name]
                table = rows_to_table(desc, [r for r, _ in ups])
                diffs = pa.array([d for _, d in ups], pa.int64())
                tables[name] = table.append_column(
                    pa.field(DIFF_COLUMN, pa.int64(), nullable=False), diffs
                )
        return SourceChunk(upper, tables)

    def _decode_runs(
        self, decoded: dict[int, list[pa.Table]], kept: list[Message]
    ) -> dict[int, list[pa.Table]] | None:
        """``decoded`` (tables per partition, in offset order) with the batch decode of
        ``kept`` (records in consumed order, each partition's at increasing offsets) added, or
        ``None`` when the batch decoder leaves a value to ``_chunk``."""
        assert self._batch is not None
        partitions = [m.partition() for m in kept]
        if partitions.count(partitions[0]) == len(kept):
            runs = {partitions[0]: kept}  # one partition: the common case
        else:
            runs = {}
            for p, m in zip(partitions, kept, strict=True):
                runs.setdefault(p, []).append(m)
        for p, run in runs.items():
            assert p is not None

            def metadata(name: str, p: int = p, run: list[Message] = run) -> list[int]:
                if name == "partition":
                    return [p] * len(run)
                return [m.offset() for m in run]  # type: ignore[misc]  # set when consumed

            table = self._batch.decode([m.value() for m in run], metadata)
            if table is None:
                return None
            decoded.setdefault(p, []).append(table)
        return decoded

    def _advanced(self, upper: KafkaPoint) -> None:
        if self._envelope.state is not None:
            self._pending_at = upper

    def _state_to(self, point: KafkaPoint) -> None:
        """Bring the UPSERT state to ``point`` (see the module docs)."""
        state = self._envelope.state
        if state is None or (self._pending_at is not None and self._pending_at == point):
            return
        state.rollback()
        self._pending_at = None
        if self._state_at == point:
            return
        state.clear()
        _log.info(
            "Kafka source: topic %r: rebuilding the UPSERT state by reading the topic from its "
            "start up to %s",
            self._source.topic,
            point,
        )
        messages = self._read_range((), point) if point else []
        messages.sort(key=lambda m: (m.partition(), m.offset()))
        self.records_reread += len(messages)
        for i in range(0, len(messages), _BATCH):
            self._envelope.apply([_record(m) for m in messages[i : i + _BATCH]])
        state.commit()
        self._state_at = point

    def _caught_up(self, consumer: Consumer) -> bool:
        """Whether every assigned partition's position is at its high watermark as of the last
        fetch (no broker request; unknown before a partition's first fetch: not caught up).
        Only a hint for ending a chunk early: a stale watermark ends it, or not, too soon."""
        topic = self._source.topic
        try:
            positions = consumer.position([TopicPartition(topic, p) for p in self._partitions])
            for tp in positions:
                _, high = consumer.get_watermark_offsets(tp, cached=True)
                if high < 0 or tp.offset < high:
                    if high == 0:
                        continue  # an empty partition
                    return False
        except Exception:  # librdkafka's KafkaException: no answer, so no hint
            return False
        return True

    def _check(self, m: Message) -> None:
        err = m.error()
        if err is None:
            return
        self._at = None  # the stream is in doubt: reassign before reading on
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise SourceUnavailable(f"Kafka source: topic {self._source.topic!r}: {err.str()}")
        raise SourceUnavailable(f"Kafka source: topic {self._source.topic!r}: {err.str()}")

    def _discover(self, consumer: Consumer) -> tuple[int, ...]:
        topic = self._source.topic
        try:
            meta = consumer.list_topics(topic, timeout=10)
        except Exception as e:  # librdkafka's KafkaException: the cluster is out of reach
            raise SourceUnavailable(f"Kafka source: cannot list topic {topic!r}: {e}") from None
        t = meta.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            why = "no such topic" if t is None or t.error is None else t.error.str()
            raise SourceUnavailable(f"Kafka source: topic {topic!r}: {why}")
        return tuple(sorted(t.partitions))

    def _consumer_at(self, lower: KafkaPoint, now_millis: int) -> Consumer:
        if self._live is None:
            self._live = self._make()
            self._at = None
        due = self._discovered_at is None or now_millis - self._discovered_at >= self._discovery_ms
        if due or not self._partitions:
            if not self._partitions:
                # The first discovery asks the reading consumer itself: nothing is in flight on
                # it yet, and its connection and metadata are then ready for the first fetch.
                found = self._discover(self._live)
            else:
                if self._metadata is None:
                    # A client of its own: on the reading consumer's connection a metadata
                    # request waits behind fetches in flight (hundreds of milliseconds each).
                    self._metadata = self._make()
                found = self._discover(self._metadata)
            self._discovered_at = now_millis
            if found != self._partitions:
                self._partitions = found
                self._at = None
        if self._at != lower:
            offsets = dict(lower)
            self._live.assign(
                [
                    TopicPartition(
                        self._source.topic, p, offsets.get(p, self._source.start_offset(p))
                    )
                    for p in self._partitions
                ]
            )
            self._at = lower
        return self._live

    def _read_range(self, lower: KafkaPoint, upper: KafkaPoint) -> list[Message]:
        """Every record of ``[lower, upper)`` (blocking until all are read)."""
        lo = dict(lower)
        todo = {
            p: (lo.get(p, self._source.start_offset(p)), hi)
            for p, hi in upper
            if lo.get(p, self._source.start_offset(p)) < hi
        }
        if not todo:
            return []
        topic = self._source.topic
        consumer = self._make()
        records: list[Message] = []
        try:
            consumer.assign([TopicPartition(topic, p, a) for p, (a, _) in todo.items()])
            progress = time.monotonic()
            while todo:
                batch = consumer.consume(_BATCH, timeout=0.5)
                if batch:
                    progress = time.monotonic()
                for m in batch:
                    self._check(m)
                    p, o = m.partition(), m.offset()
                    assert p is not None and o is not None
                    if p not in todo:
                        continue
                    a, hi = todo[p]
                    if a <= o < hi:
                        records.append(m)
                    if o >= hi - 1:
                        del todo[p]
                if not batch and todo:
                    # A compacted or control record at hi - 1: the position tells.
                    positions = consumer.position([TopicPartition(topic, p) for p in todo])
                    for tp in positions:
                        if tp.offset >= todo[tp.partition][1]:
                            del todo[tp.partition]
                if todo and time.monotonic() - progress > self._replay_timeout:
                    raise SourceUnavailable(
                        f"Kafka source: topic {topic!r}: could not re-read offsets "
                        f"{sorted(todo.items())} within {self._replay_timeout:.0f} s"
                    )
        finally:
            consumer.close()
        self._at = self._at if self._live is not None else None
        return records


@dataclass
class _Reading:
    """What one read from ``lower`` has consumed so far (a poll's, or one read ahead)."""

    lower: KafkaPoint
    next_offset: dict[int, int]
    decoded: dict[int, list[pa.Table]] | None
    records: list[Message] = field(default_factory=list)
    behind: bool = True  # until a batch finds every partition at its high watermark
    failed: BaseException | None = None

    @staticmethod
    def at(lower: KafkaPoint, batch: bool) -> _Reading:
        return _Reading(lower, dict(lower), {} if batch else None)

    def point(self) -> KafkaPoint:
        return tuple(sorted(self.next_offset.items()))


def _fresh_run(
    batch: list[Message], next_offset: dict[int, int], start: Callable[[int], int]
) -> bool:
    """Whether ``batch`` is error-free records of one partition at increasing offsets, none
    before where that partition's stream continues; if so, moves ``next_offset`` past it."""
    p, o, end = batch[0].partition(), batch[0].offset(), batch[-1].offset()
    if p is None or o is None or end is None or o < next_offset.get(p, start(p)):
        return False
    errors = [m.error() for m in batch]
    if errors.count(None) != len(batch):
        return False
    partitions = [m.partition() for m in batch]
    if partitions.count(p) != len(batch):
        return False
    offsets: list[int] = [m.offset() for m in batch]  # type: ignore[misc]
    if not all(map(operator.lt, offsets, offsets[1:])):
        return False
    next_offset[p] = end + 1
    return True


def _rows(table: pa.Table, desc: RelationDesc) -> Iterator[Row]:
    """The rows of ``table`` in ``desc``'s columns, converted a slice at a time."""
    names = [c.name for c in desc.columns]
    for start in range(0, table.num_rows, _BATCH):
        yield from table_to_rows(table.slice(start, _BATCH), names)


def _record(m: Message) -> Record:
    p, o = m.partition(), m.offset()
    assert p is not None and o is not None
    kind, ms = m.timestamp()
    raw = m.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw  # a consumer gives a list of pairs
    headers = tuple((str(h[0]), _bytes(h[1])) for h in pairs)
    return Record(p, o, _bytes(m.key()), _bytes(m.value()), None if kind == 0 else ms, headers)


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
