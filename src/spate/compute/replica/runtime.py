"""The replica's driver for dataflows: Spark work off the event loop, one worker thread.

:class:`ComputeRuntime` performs the actions of :class:`~spate.compute.replica.state.
ReplicaState` that touch Spark, persist or arrangements, and reports the outcome as events
(posted back to the event loop thread):

* **One Spark worker thread** runs, in the order the actions arrived, every build, step,
  compaction and drop. So the protocol stays responsive while Spark works, and dataflow state
  is only ever mutated by one thread.
* **Scheduling.** A scheduler task wakes when a watched shard's upper advances
  (:class:`~spate.compute.replica.uppers.ShardUppers`), when a dataflow is built or scheduled,
  and after each step (an index another dataflow imports may have advanced). It then steps,
  round-robin, each scheduled dataflow whose inputs allow progress (``ready_upper() > upper``),
  one step per dataflow per turn, until none can progress.
* **Drops cancel.** A dataflow dropped while the worker runs Spark jobs for it (a one-off
  read canceled or timed out) has those jobs cancelled at once, from the event loop's side:
  each build and step runs its jobs under the dataflow's job tag (``spate-df<key>``, with
  ``interruptOnCancel``), and a drop cancels that tag (again every :data:`CANCEL_REPEAT_S`
  while the worker is still in that dataflow, so a job it starts next is cancelled too). The
  build or step then fails quietly, the worker moves on to the drop, and every other dataflow
  keeps being stepped and served. The tag costs two JVM calls when it changes, so it stays on
  between steps, and a step of a dataflow whose last step ran no Spark job (a small step,
  computed with Arrow) does not change it: a drop waits for such a step instead.
* **Failures stay local.** A step that raises is retried with backoff (``STEP_ATTEMPTS`` in a
  row); then the dataflow is reported failed (``DataflowFailed``) and no longer stepped. A build
  that raises reports ``DataflowFailed`` at once. Nothing else is affected.
* **Peeks.** Index peeks read the arrangement with pyarrow on a small peek pool, under the
  dataflow's lock (steps hold it while they commit), so a small peek never waits for Spark
  work on other dataflows. Persist peeks wait for the shard's upper, then read the shard.
* **Materialized views** are written after the step that computed them
  (:mod:`spate.compute.replica.sinks`), on a thread of their own while the next step runs
  (:mod:`~spate.compute.replica.sink_writer`); their shard upper is reported as ``SinkProgress``.
  Each step's updates of a view also go to the view's feed (:mod:`~spate.compute.replica.
  view_feed`), from which a subscribe of the view on this replica steps at once, without
  waiting for the write and reading it back.
* **Merges wait.** A step appends to its dataflow's arrangements without merging their
  batches (:meth:`~spate.render.dataflow.Dataflow.defer_merges`); the scheduler merges them,
  one arrangement at a time, once no dataflow can step, so a step's output (and the steps of
  the subscribes reading it) does not wait for merges. An arrangement that has gone
  ``MAX_DEFERRED_APPENDS`` appends without one merges as it appends.
* A maintenance task renews reader leases, moves the readers' sinces up behind the steps
  (a step moves them at most every ``SINCE_DOWNGRADE_S``: persist writes off the way to
  its output) and lets read-only views observe their shards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from spate.compute.replica.actions import (
    AbortPeek,
    Action,
    BuildDataflow,
    CompactExport,
    Configure,
    DataflowFailed,
    DataflowReady,
    DropDataflow,
    DropSink,
    EnableWrites,
    Event,
    PeekFinished,
    RunPeek,
    ScheduleDataflow,
    Stepped,
)
from spate.compute.replica.cardinality import (
    DEFAULT_MAX_ONE_OFF_ROWS,
    estimate_rows,
    is_one_off,
)
from spate.compute.replica.inputs import InputUnavailable, ReplicaInputs
from spate.compute.replica.metrics import ReplicaMetrics
from spate.compute.replica.persist_peek import serve_persist_peek
from spate.compute.replica.render_api import RenderedDataflow, Renderer, spark_renderer
from spate.compute.replica.sink_writer import SinkWriter
from spate.compute.replica.sinks import MaterializedViewSink
from spate.compute.replica.uppers import ShardUppers
from spate.compute.replica.view_errors import check_imports, error_through
from spate.compute.replica.view_feed import ViewFeed
from spate.errors import OUT_OF_MEMORY, is_sqlstate
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, IdGen, PeekId, ShardId
from spate.persist.client import PersistClient
from spate.persist.error_shard import ERRORS_DESC, error_updates, errors_shard
from spate.plan.dataflow import DataflowDescription
from spate.protocol.compute import IndexTarget, Peek
from spate.repr.desc import RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spate.render.arrangement import Arrangement  # type: ignore[import-not-found,unused-ignore]

_log: Final = logging.getLogger("spate.compute.replica")

STEP_ATTEMPTS: Final = 3
"""Consecutive failed steps before a dataflow is reported failed."""
STEP_BACKOFF_S: Final = 0.5
MAINTENANCE_S: Final = 1.0
LEASE_RENEWAL_S: Final = 60.0
CANCEL_REPEAT_S: Final = 0.1
SINCE_DOWNGRADE_S: Final = 1.0
"""How often a stepping dataflow moves its readers' sinces (a consensus write per input; the
maintenance pass does it too): not after every step, on the way to the step's output."""
"""How often a drop cancels the Spark jobs of its dataflow again while the worker is still in
it (a cancel reaches only the jobs already running)."""


def job_tag(key: int) -> str:
    """The Spark job tag of dataflow ``key``'s builds and steps."""
    return f"spate-df{key}"


@dataclass
class _Running:
    key: int
    description: DataflowDescription
    dataflow: RenderedDataflow
    inputs: ReplicaInputs
    scratch: Path
    sinks: dict[GlobalId, MaterializedViewSink] = field(default_factory=dict)
    subscribes: set[GlobalId] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    scheduled: bool = False
    failed: bool = False
    failures: int = 0
    retry_at: float = 0.0
    last_step: float = 0.0
    last_downgrade: float = 0.0
    spark_jobs: bool = True
    """Whether the last step ran Spark jobs (or none ran yet, or it failed): the next step runs
    under the dataflow's job tag only then (:meth:`ComputeRuntime._jobs_of`)."""


class ComputeRuntime:
    """Performs dataflow, peek and sink actions (module docs).

    ``post(event)`` is called on the event loop thread for every outcome. ``spark`` creates the
    process's SparkSession (called once, on the worker thread). ``persist`` is ``None`` when the
    replica has no persist location: dataflows reading shards then fail to build.
    """

    def __init__(
        self,
        *,
        post: Callable[[Event], None],
        spark: Callable[[], SparkSession],
        persist: PersistClient | None,
        scratch: Path,
        ids: IdGen,
        metrics: ReplicaMetrics,
        renderer: Renderer | None = None,
        name: str = "replica",
    ) -> None:
        self._post_event = post
        self._spark_factory = spark
        self._spark: SparkSession | None = None
        self._persist = persist
        self._scratch = scratch
        self._ids = ids
        self._metrics = metrics
        self._renderer = renderer
        self.name = name
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="spate-compute-spark")
        self._peeker = ThreadPoolExecutor(2, thread_name_prefix="spate-compute-peek")
        self._sink_writer = SinkWriter(name, metrics, self._post, self._written)
        self._running: dict[int, _Running] = {}
        self._rr: list[int] = []
        self._feeds: dict[ShardId, ViewFeed] = {}
        """The feed of each view shard a dataflow here computes (and its errors shard's)."""
        self._uppers = ShardUppers(
            self._fetch_upper,
            on_change=self.wake,
            probe=None if persist is None else persist.change_probe(),
        )
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._peeks: dict[PeekId, asyncio.Future[Any]] = {}
        self._step_interval_s = 0.0
        self._max_one_off_rows = DEFAULT_MAX_ONE_OFF_ROWS
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._closed = False
        self._dropping: set[int] = set()
        """Dataflows a drop is pending for: not stepped again, their Spark jobs cancelled."""
        self._busy: int | None = None
        """The dataflow the worker is building or stepping now."""
        self._canceler = ThreadPoolExecutor(1, thread_name_prefix="spate-compute-cancel")
        self._interrupting = False
        self._tagged: int | None = None
        """The dataflow whose job tag the worker thread carries (:meth:`_tag`)."""

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, *, warm_up: bool = True) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._scratch.mkdir(parents=True, exist_ok=True)
        self._tasks = [
            asyncio.create_task(self._uppers.run(), name="spate-compute-uppers"),
            asyncio.create_task(self._schedule_loop(), name="spate-compute-scheduler"),
            asyncio.create_task(self._maintenance_loop(), name="spate-compute-maintenance"),
        ]
        if warm_up:
            self._submit(self._warm_up, "warm-up")

    async def close(self) -> None:
        """Stop scheduling, drop every dataflow (expiring readers and writers); a Spark job
        running for one is cancelled first."""
        busy = self._busy
        for key in {*self._running, *([] if busy is None else [busy])}:
            self._cancel_jobs(key)
        self._closed = True
        for fut in self._peeks.values():
            fut.cancel()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._worker, self._drop_all)
        self._worker.shutdown(wait=True)
        self._canceler.shutdown(wait=True)
        self._sink_writer.shutdown()
        self._peeker.shutdown(wait=True)

    def _warm_up(self) -> None:
        started = time.perf_counter()
        spark = self.spark()
        spark.range(1).count()
        _log.info(
            "replica=%s: Spark %s ready in %.1f s",
            self.name,
            spark.version,
            time.perf_counter() - started,
        )

    def spark(self) -> SparkSession:
        """The process's SparkSession (worker thread only)."""
        if self._spark is None:
            self._spark = self._spark_factory()
        return self._spark

    # -- plumbing -----------------------------------------------------------------------------

    def wake(self) -> None:
        """Look for dataflows that can step (event loop thread)."""
        self._wake.set()

    def _post(self, event: Event) -> None:
        """Report ``event`` from any thread."""
        loop = self._loop
        if loop is None or self._closed:
            return
        if threading.get_ident() == self._loop_thread:
            self._post_event(event)
        else:
            loop.call_soon_threadsafe(self._deliver, event)

    def _deliver(self, event: Event) -> None:
        if not self._closed:
            self._post_event(event)

    def _submit(self, fn: Callable[[], None], what: str) -> None:
        loop = self._loop
        assert loop is not None, "ComputeRuntime.start() was not called"
        fut = loop.run_in_executor(self._worker, fn)
        fut.add_done_callback(lambda f: self._log_crash(f, what))

    def _log_crash(self, fut: asyncio.Future[Any], what: str) -> None:
        if fut.cancelled():
            return
        e = fut.exception()
        if e is not None:
            _log.error("replica=%s: %s failed: %r", self.name, what, e, exc_info=e)

    def _fetch_upper(self, shard: Any) -> Frontier:
        assert self._persist is not None
        return self._persist.fetch_state(shard).upper

    # -- actions ------------------------------------------------------------------------------

    def execute(self, action: Action) -> None:
        """Perform ``action`` (event loop thread; never blocks)."""
        if self._closed:
            return
        if isinstance(action, BuildDataflow):
            self._submit(lambda: self._build(action), f"building dataflow {action.key}")
        elif isinstance(action, ScheduleDataflow):
            self._submit(lambda: self._schedule(action.key), "scheduling")
        elif isinstance(action, CompactExport):
            self._submit(lambda: self._compact(action), "compaction")
        elif isinstance(action, DropSink):
            self._submit(lambda: self._drop_sink(action), "dropping a sink")
        elif isinstance(action, DropDataflow):
            self._cancel_jobs(action.key)
            self._submit(lambda: self._drop(action.key), f"dropping dataflow {action.key}")
        elif isinstance(action, EnableWrites):
            self._submit(lambda: self._enable_writes(action), "allowing writes")
        elif isinstance(action, Configure):
            ms = action.params.step_interval_ms
            self._step_interval_s = 0.0 if ms is None else ms / 1000
            cap = action.params.max_one_off_rows
            self._max_one_off_rows = DEFAULT_MAX_ONE_OFF_ROWS if cap is None else cap
        elif isinstance(action, RunPeek):
            self._run_peek(action)
        elif isinstance(action, AbortPeek):
            fut = self._peeks.pop(action.uuid, None)
            if fut is not None:
                fut.cancel()
        else:
            raise TypeError(f"the runtime does not perform {type(action).__name__}")

    # -- cancelling ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _jobs_of(self, key: int, *, tag: bool = True) -> Iterator[None]:
        """Run the Spark jobs started inside under dataflow ``key``'s job tag (worker thread).
        ``tag=False``: a step expected to run no Spark job (its dataflow's last step ran none:
        a small step computed with Arrow) saves the JVM calls of switching tags; a drop then
        waits for it to end rather than cancelling the job it unexpectedly starts."""
        sc = getattr(self.spark(), "sparkContext", None)  # None: a renderer without Spark
        if sc is not None and tag:
            if not self._interrupting:  # a thread-local setting of the (one) worker thread
                sc.setInterruptOnCancel(True)
                self._interrupting = True
            self._tag(sc, key)
        self._busy = key
        try:
            if key in self._dropping:
                raise DataflowCanceled(f"dataflow {key} was dropped")
            yield
        finally:
            self._busy = None
            if sc is not None and key in self._dropping:
                self._tag(sc, None)

    def _tag(self, sc: Any, key: int | None) -> None:
        """Carry dataflow ``key``'s job tag (none: no tag) on the worker thread. The tag stays
        between the steps of one dataflow (two JVM calls a step saved) and is taken off when
        another dataflow steps or this one is being dropped, so a drop cancels only its own
        jobs (worker thread)."""
        if self._tagged == key:
            return
        if self._tagged is not None:
            sc.removeJobTag(job_tag(self._tagged))
            self._tagged = None
        if key is not None:
            sc.addJobTag(job_tag(key))
            self._tagged = key

    def _cancel_jobs(self, key: int) -> None:
        """Dataflow ``key`` is being dropped: stop stepping it and cancel its Spark jobs
        (event loop thread; the cancelling runs on a thread of its own)."""
        self._dropping.add(key)
        r = self._running.get(key)
        cancel = getattr(r.dataflow, "cancel", None) if r is not None else None
        if cancel is not None:
            cancel()  # a failing step is not retried
        if self._busy == key:
            self._canceler.submit(self._cancel_while_busy, key)

    def _cancel_while_busy(self, key: int) -> None:
        sc = getattr(self._spark, "sparkContext", None)
        while sc is not None and self._busy == key:
            try:
                sc.cancelJobsWithTag(job_tag(key))
            except Exception as e:  # the JVM going away: nothing left to cancel
                _log.warning("replica=%s: cancelling dataflow %d: %s", self.name, key, e)
                return
            time.sleep(CANCEL_REPEAT_S)

    # -- worker-thread jobs -------------------------------------------------------------------

    def _build(self, action: BuildDataflow) -> None:
        desc = action.description
        key = action.key
        started = time.perf_counter()
        scratch = self._scratch / f"df{key}"
        inputs: ReplicaInputs | None = None
        sinks: dict[GlobalId, MaterializedViewSink] = {}
        sources = dict(action.index_sources)
        too_large = self._too_large(desc, sources)
        if too_large is not None:
            self._metrics.dataflow_failures.inc()
            self._post(DataflowFailed(key, too_large, OUT_OF_MEMORY))
            return
        try:
            inputs = ReplicaInputs(
                desc,
                persist=self._persist,
                uppers=self._uppers,
                arrangements=lambda id: self._arrangement(sources, id),
                feeds=self._feeds.get if _subscribes_only(desc) else None,
            )
            renderer = self._renderer or spark_renderer()
            with self._jobs_of(key):
                dataflow = renderer(
                    desc, inputs, spark=self.spark(), scratch=scratch, name=f"df{key}"
                )
            for s in desc.sink_exports:
                if s.is_materialized_view():
                    sinks[s.id] = self._open_sink(desc, s.id, s.from_desc, s.connection)
        except Exception as e:
            for sink in sinks.values():
                sink.close()
            if inputs is not None:
                inputs.close()
            shutil.rmtree(scratch, ignore_errors=True)
            if key in self._dropping:
                _log.info("replica=%s: dataflow %d dropped while building", self.name, key)
                return
            self._metrics.dataflow_failures.inc()
            why = f"building the dataflow failed: {_short(e)}"
            self._post(DataflowFailed(key, why, _sqlstate(e)))
            return
        defer = getattr(dataflow, "defer_merges", None)
        if defer is not None:
            defer()  # merged while no dataflow can step (module docs)
        r = _Running(key, desc, dataflow, inputs, scratch, sinks, set(desc.subscribe_ids()))
        self._running[key] = r
        self._open_feeds(r)
        self._rr.append(key)
        self._metrics.dataflows.set(len(self._running))
        self._metrics.build_seconds.observe(time.perf_counter() - started)
        _log.info(
            "replica=%s collection=%s: dataflow %d built at as_of %s in %.2f s",
            self.name,
            ",".join(str(i) for i in desc.export_ids()),
            key,
            desc.as_of,
            time.perf_counter() - started,
        )
        self._post(DataflowReady(key, dataflow.upper))

    def _too_large(self, desc: DataflowDescription, sources: Mapping[GlobalId, int]) -> str | None:
        """Why one-off ``desc`` is refused before it is built (``None``: it is not): its
        estimated rows exceed ``max_one_off_rows`` (:mod:`~spate.compute.replica.cardinality`)."""
        if not is_one_off(desc):
            return None
        rows: dict[GlobalId, int] = {}
        try:
            for s in desc.source_imports:
                if s.shard is not None and self._persist is not None:
                    batches = self._persist.fetch_state(s.shard).batches
                    rows[s.id] = sum(b.num_updates for b in batches)
            for i in desc.index_imports:
                rows[i.id] = self._arrangement(sources, i.id).rows
        except Exception as e:  # the build reports what is missing
            _log.debug("replica=%s: no row estimate for %s: %s", self.name, desc.debug_name, e)
            return None
        estimate = estimate_rows(desc, rows)
        cap = self._max_one_off_rows
        if estimate <= cap:
            return None
        ids = ",".join(str(i) for i in desc.export_ids())
        return (
            f"one-off read {ids}: out of memory: it would produce about {estimate:.3g} rows, "
            f"more than the {cap:.3g} a one-off read may (max_one_off_rows) [SQLSTATE 53200]"
        )

    def _open_sink(
        self, desc: DataflowDescription, id: GlobalId, from_desc: RelationDesc, connection: object
    ) -> MaterializedViewSink:
        shard = getattr(connection, "shard", None)
        if shard is None:
            raise InputUnavailable(f"materialized view {id} has no shard")
        if self._persist is None:
            raise InputUnavailable(f"materialized view {id}: this replica has no persist location")
        assert desc.as_of is not None
        as_of = desc.as_of.elements[0]
        errors = self._persist.open_writer(errors_shard(shard), ERRORS_DESC)
        errors_sink = MaterializedViewSink(id, errors, as_of=as_of, ids=self._ids)
        writer = self._persist.open_writer(shard, from_desc)
        return MaterializedViewSink(id, writer, as_of=as_of, ids=self._ids, errors=errors_sink)

    def _open_feeds(self, r: _Running) -> None:
        """A feed for each view shard (and errors shard) ``r`` writes (module docs of
        :mod:`~spate.compute.replica.view_feed`: from ``max(as_of, shard upper) + 1``)."""
        assert r.description.as_of is not None
        as_of = r.description.as_of.elements[0]
        for sink in r.sinks.values():
            for s in (sink, sink.errors):
                if s is None:
                    continue
                upper = s.shard_upper.as_option()
                if upper is None:
                    continue
                old = self._feeds.pop(s.shard_id, None)
                if old is not None:
                    old.close()
                self._feeds[s.shard_id] = ViewFeed(lower=max(as_of, upper) + 1)

    def _close_feeds(self, sinks: Mapping[GlobalId, MaterializedViewSink]) -> None:
        for sink in sinks.values():
            for s in (sink, sink.errors):
                if s is not None:
                    feed = self._feeds.pop(s.shard_id, None)
                    if feed is not None:
                        feed.close()

    def _feed(self, sink: MaterializedViewSink, updates: pa.Table, upper: Frontier) -> None:
        feed = self._feeds.get(sink.shard_id)
        if feed is not None:
            feed.append(updates, upper=upper)
            feed.trim(sink.shard_upper)

    def _arrangement(self, sources: Mapping[GlobalId, int], id: GlobalId) -> Arrangement:
        r = self._running.get(sources.get(id, -1))
        if r is None:
            raise InputUnavailable(f"index {id} is not maintained on this replica")
        return r.dataflow.arrangement(id)

    def _schedule(self, key: int) -> None:
        r = self._running.get(key)
        if r is not None:
            r.scheduled = True
            self._post_wake()

    def _post_wake(self) -> None:
        loop = self._loop
        if loop is not None and not self._closed:
            loop.call_soon_threadsafe(self.wake)

    def _compact(self, action: CompactExport) -> None:
        r = self._running.get(action.key)
        if r is None or r.failed:
            return
        with r.lock:
            r.dataflow.allow_compaction(action.export, action.frontier)

    def _drop_sink(self, action: DropSink) -> None:
        r = self._running.get(action.key)
        if r is None:
            return
        sink = r.sinks.pop(action.export, None)
        if sink is not None:
            self._close_feeds({action.export: sink})
            sink.close()
        r.subscribes.discard(action.export)
        if not r.failed:
            with r.lock:
                r.dataflow.allow_compaction(action.export, Antichain.empty())

    def _enable_writes(self, action: EnableWrites) -> None:
        r = self._running.get(action.key)
        sink = r.sinks.get(action.export) if r is not None else None
        if r is None or sink is None:
            return
        sink.allow_writes()
        self._flush(r)

    def _drop(self, key: int) -> None:
        self._dropping.discard(key)
        r = self._running.pop(key, None)
        if r is None:
            return
        self._rr.remove(key)
        self._close_feeds(r.sinks)
        for sink in r.sinks.values():
            sink.close()
        r.inputs.close()
        with r.lock:
            try:
                r.dataflow.drop()
            except Exception as e:
                _log.warning("replica=%s: dropping dataflow %d: %s", self.name, key, e)
        shutil.rmtree(r.scratch, ignore_errors=True)
        self._metrics.dataflows.set(len(self._running))
        sc = getattr(self._spark, "sparkContext", None)
        if sc is not None and self._tagged == key:
            try:
                self._tag(sc, None)
            except Exception as e:  # the JVM going away: no job runs under it any more
                _log.info("replica=%s: untagging dataflow %d: %s", self.name, key, e)

    def _drop_all(self) -> None:
        for key in list(self._running):
            self._drop(key)

    # -- stepping -----------------------------------------------------------------------------

    async def _schedule_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while not self._closed:
                try:
                    stepped = await loop.run_in_executor(self._worker, self._step_round)
                except Exception as e:  # a bug here must not stop every dataflow for good
                    _log.error("replica=%s: scheduling failed: %r", self.name, e, exc_info=e)
                    await asyncio.sleep(STEP_BACKOFF_S)
                    self.wake()
                    break
                if not stepped:
                    break

    def _step_round(self) -> bool:
        """Step, one after the other on the worker thread, up to one step per dataflow
        (:meth:`_step_next`); False if none could progress. A subscribe's dataflow that reads
        the view just stepped steps at once, without a round trip through the event loop;
        other work queued for the worker waits at most one round."""
        stepped = False
        for _ in range(max(1, len(self._rr))):
            if self._closed or not self._step_next():
                break
            stepped = True
        if not stepped and not self._closed:
            return self._maintain_one()
        return stepped

    def _maintain_one(self) -> bool:
        """Do one piece of the work a dataflow's steps left for later (an arrangement's
        merges: module docs); False when there was none."""
        for key in list(self._rr):
            r = self._running[key]
            maintain = getattr(r.dataflow, "maintain", None)
            if maintain is None or r.failed or key in self._dropping:
                continue
            try:
                with r.lock:
                    if maintain():
                        return True
            except Exception as e:  # the batches stay unmerged; the next append merges them
                _log.warning("replica=%s: merging in dataflow %d failed: %s", self.name, key, e)
                return True
        return False

    def _step_next(self) -> bool:
        """Step the next dataflow (round-robin) that can make progress; False if none can."""
        now = time.monotonic()
        soonest: float | None = None
        for _ in range(len(self._rr)):
            key = self._rr.pop(0)
            self._rr.append(key)
            r = self._running[key]
            if not r.scheduled or r.failed or key in self._dropping:
                continue
            not_before = max(r.retry_at, r.last_step + self._step_interval_s)
            try:
                ready = r.dataflow.ready_upper()
            except Exception as e:
                self._step_failed(r, e)
                continue
            if not r.dataflow.upper.less_than(ready):
                continue
            if now < not_before:
                soonest = not_before if soonest is None else min(soonest, not_before)
                continue
            self._step(r, ready)
            return True
        if soonest is not None and self._loop is not None:
            delay = soonest - now
            self._loop.call_soon_threadsafe(self._loop.call_later, delay, self.wake)
        return False

    def _step(self, r: _Running, ready: Frontier) -> None:
        started = time.perf_counter()
        r.last_step = time.monotonic()
        try:
            with self._jobs_of(r.key, tag=r.spark_jobs), r.lock:
                report = r.dataflow.step(ready)
            r.inputs.after_step()
        except Exception as e:
            r.spark_jobs = True  # a retry runs under the tag
            if r.key in self._dropping:
                _log.info(
                    "replica=%s: dataflow %d dropped while stepping (%.2f s): its Spark jobs "
                    "were cancelled",
                    self.name,
                    r.key,
                    time.perf_counter() - started,
                )
                return
            self._step_failed(r, e)
            return
        r.failures = 0
        r.spark_jobs = report.actions > 0
        upper = r.dataflow.upper
        self._metrics.steps.inc()
        seconds = time.perf_counter() - started
        self._metrics.step_seconds.observe(seconds)
        _log.debug(
            "replica=%s: dataflow %d stepped to %s in %.3f s", self.name, r.key, upper, seconds
        )
        updates = report.sink_updates
        for id, sink in r.sinks.items():
            table = updates.get(id)
            table = pa.table({}) if table is None else table
            sink.add(table, upper=upper, errors=report.errors)
            self._feed(sink, table, upper)
            if sink.errors is not None:
                errors = report.errors
                fed = pa.table({}) if errors is None else error_updates(*errors.columns)
                self._feed(sink.errors, fed, upper)
        if r.sinks:  # written while the next step runs (module docs)
            self._sink_writer.flush_later(r.key, r.sinks)
        subs = {i: t for i, t in updates.items() if i in r.subscribes}
        last = upper.as_option()
        error = None if last is None else error_through(self._running.values(), r, last - 1)
        self._post(
            Stepped(
                r.key,
                upper,
                subs,
                error,
                seconds=seconds,
                spark_jobs=report.actions,
                rows_in=report.rows_in,
                rows_out=report.rows_out,
            )
        )
        if r.last_step - r.last_downgrade >= SINCE_DOWNGRADE_S:
            self._downgrade_sinces(r)

    def _downgrade_sinces(self, r: _Running) -> None:
        r.last_downgrade = time.monotonic()
        r.inputs.downgrade_sinces()

    def _written(self, shard: ShardId, upper: Frontier) -> None:
        """A view's shard written up to ``upper`` by this replica (any thread)."""
        loop = self._loop
        if self._uppers.observe(shard, upper) and loop is not None and not self._closed:
            loop.call_soon_threadsafe(self._uppers.notify)

    def _flush(self, r: _Running) -> None:
        self._sink_writer.flush(r.key, r.sinks)

    def _step_failed(self, r: _Running, e: Exception) -> None:
        r.failures += 1
        self._metrics.step_failures.inc()
        exports = ",".join(str(i) for i in r.description.export_ids())
        if r.failures >= STEP_ATTEMPTS:
            r.failed = True
            self._close_feeds(r.sinks)
            self._metrics.dataflow_failures.inc()
            _log.error(
                "replica=%s collection=%s: dataflow %d failed %d times in a row, giving up: %s",
                self.name,
                exports,
                r.key,
                r.failures,
                _short(e),
                exc_info=e,
            )
            self._post(DataflowFailed(r.key, _short(e), _sqlstate(e)))
            return
        delay = STEP_BACKOFF_S * 2 ** (r.failures - 1)
        r.retry_at = time.monotonic() + delay
        _log.warning(
            "replica=%s collection=%s: step of dataflow %d failed (attempt %d of %d, retry in "
            "%.1f s): %s",
            self.name,
            exports,
            r.key,
            r.failures,
            STEP_ATTEMPTS,
            delay,
            _short(e),
        )

    # -- maintenance --------------------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        loop = asyncio.get_running_loop()
        last_renewal = time.monotonic()
        while True:
            await asyncio.sleep(MAINTENANCE_S)
            try:
                await loop.run_in_executor(self._worker, self._flush_all)
                if time.monotonic() - last_renewal >= LEASE_RENEWAL_S:
                    last_renewal = time.monotonic()
                    await loop.run_in_executor(self._worker, self._renew_leases)
            except Exception as e:
                _log.error("replica=%s: maintenance failed: %r", self.name, e, exc_info=e)

    def _flush_all(self) -> None:
        for r in list(self._running.values()):
            if r.sinks and not r.failed:
                self._flush(r)
            if r.last_downgrade < r.last_step:
                self._downgrade_sinces(r)

    def _renew_leases(self) -> None:
        for r in list(self._running.values()):
            try:
                r.inputs.renew_leases()
                for sink in r.sinks.values():
                    sink.renew_lease()
            except Exception as e:
                _log.warning("replica=%s: renewing leases of dataflow %d: %s", self.name, r.key, e)

    # -- peeks --------------------------------------------------------------------------------

    def _run_peek(self, action: RunPeek) -> None:
        peek = action.peek
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any]
        if isinstance(peek.target, IndexTarget):
            key = action.key
            assert key is not None
            fut = loop.run_in_executor(self._peeker, self._index_peek, key, peek)
        else:
            fut = asyncio.ensure_future(
                serve_persist_peek(
                    self._persist, self._uppers, self._running.values(), peek, self._metrics
                )
            )
        self._peeks[peek.uuid] = fut
        fut.add_done_callback(lambda f: self._peek_done(action, f))

    def _peek_done(self, action: RunPeek, fut: asyncio.Future[Any]) -> None:
        uuid = action.peek.uuid
        if self._peeks.get(uuid) is fut:
            del self._peeks[uuid]
        if fut.cancelled():
            return
        e = fut.exception()
        if e is not None:
            msg = str(e) if not isinstance(e, AssertionError) else repr(e)
            error = msg or type(e).__name__
            text = getattr(e, "pg_message", None)
            pg_message = text if isinstance(text, str) else None
            self._post(PeekFinished(action.epoch, uuid, None, error, _sqlstate(e), pg_message))
            return
        self._post(PeekFinished(action.epoch, uuid, rows=fut.result()))

    def _index_peek(self, key: int, peek: Peek) -> pa.Table:
        r = self._running.get(key)
        if r is None:
            raise InputUnavailable(f"collection {peek.target.id} is not running on this replica")
        started = time.perf_counter()
        with r.lock:
            rows = r.dataflow.peek(
                peek.target.id,
                timestamp=peek.timestamp,
                finishing=peek.finishing,
                literal_constraints=peek.literal_constraints,
                result_desc=peek.result_desc,
            )
        check_imports(self._running.values(), r, peek.timestamp)
        self._metrics.peek_seconds("index", time.perf_counter() - started)
        return rows


def _subscribes_only(desc: DataflowDescription) -> bool:
    """Whether every export of ``desc`` is a subscribe (it may read views' feeds)."""
    return (
        not desc.index_exports
        and bool(desc.sink_exports)
        and all(s.is_subscribe() for s in desc.sink_exports)
    )


class DataflowCanceled(Exception):
    """A build or step of a dataflow that is being dropped is not started."""


def _sqlstate(e: BaseException) -> str | None:
    """The SQLSTATE ``e`` carries (an evaluation error's, a one-off refused as too large…), as
    the controller is answered it; ``None`` if it carries none."""
    code = getattr(e, "sqlstate", None)
    return code if is_sqlstate(code) else None


def _short(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    text = lines[0][:500] if lines else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
