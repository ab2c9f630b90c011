"""The operations of an :class:`~spate.environment.api.Environment`: clusters, objects, table
writes and reads. The Python API calls them directly; SQL statements are carried out by them
(:mod:`spate.environment.sql`).

Every operation validates first and either happens completely or not at all; errors name the
objects, columns and frontiers. Each runs on the environment's event loop
(:class:`~spate.environment.base.EnvironmentBase`).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from spate.environment import clusters, objects, reads, tables
from spate.environment.base import EnvironmentBase, call, check_timeout, next_of
from spate.environment.catalog import CatalogState, Constraint, item_desc, kind_of
from spate.environment.changes import Changes
from spate.environment.definitions import SqlDefinition
from spate.environment.pipeline import WritePipeline
from spate.environment.read_holds import ReadHolds
from spate.environment.read_plan import ReadPlan
from spate.environment.reads import Isolation
from spate.environment.transaction import Transaction
from spate.environment.write_result import WriteResult
from spate.errors import InvalidArgument, UsageError, check_argument
from spate.ids import GlobalId
from spate.plan.builder import ColumnSpec
from spate.plan.relation import Get, RelationExpr
from spate.protocol.storage_desc import SinkConnection, SourceConnection
from spate.repr.desc import RelationDesc
from spate.repr.types import Datum

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")


class EnvironmentOperations(EnvironmentBase):
    """What an environment does: clusters, objects, writes and reads. Use
    :class:`spate.Environment`, which adds SQL.

    Example::

        with spate.Environment.open("spate-data") as env:
            env.create_table("t", RelationDesc.of(("a", INT64, False)))
            env.insert("t", [(1,)])
    """

    # -- clusters --------------------------------------------------------------------------------

    def create_cluster(
        self, name: str, *, replicas: int | Sequence[str] | Mapping[str, str] = 1
    ) -> None:
        """Create a compute cluster with ``replicas``: a count or names of local replica
        processes, or ``{"r1": "host:port", ...}``: replicas started elsewhere (``spate replica
        --role compute --listen host:port``), which the controller connects to and supervises
        (health, reconnection, rehydration) like local ones.

        Every replica runs every dataflow of the cluster; reads are answered by the first that
        can. Raises :class:`~spate.errors.NameExists` when the name is taken.

        Example::

            env.create_cluster("c", replicas=2)          # replicas r1 and r2
            env.create_cluster("d", replicas=["a", "b"])
            env.create_cluster("e", replicas={"r1": "10.0.0.8:6875"})
        """
        names = clusters.replica_names(replicas)
        addresses = dict(replicas) if isinstance(replicas, Mapping) else None
        self._run(clusters.create_cluster(self.runtime, name, names, addresses))

    def add_replica(self, cluster: str, name: str, *, address: str | None = None) -> None:
        """Add replica ``name`` to ``cluster`` (a local process, or the one started elsewhere
        listening at ``address``); it hydrates every dataflow of the cluster.

        Example::

            env.add_replica("c", "r3")
            env.add_replica("c", "r4", address="10.0.0.9:6875")
        """
        self._run(clusters.add_replica(self.runtime, cluster, name, address))

    def drop_replica(self, cluster: str, name: str) -> None:
        """Stop replica ``name`` of ``cluster`` and forget it; the other replicas keep serving.

        Example::

            env.drop_replica("c", "r3")
        """
        self._run(clusters.drop_replica(self.runtime, cluster, name))

    def drop_cluster(self, name: str) -> None:
        """Drop cluster ``name`` and stop its replicas. It must run no index or materialized
        view any more (drop them first).

        Example::

            env.drop_cluster("d")
        """
        self._run(clusters.drop_cluster(self.runtime, name))

    # -- objects ---------------------------------------------------------------------------------

    def get(self, name: str) -> Get:
        """A plan reading ``name`` (a table, source, view or materialized view), to build views
        and queries on with the plan builder (:mod:`spate.plan`).

        Example::

            from spate import col, count, max_

            best = env.get("bids").reduce(["auction"], top=max_(col("price")), n=count())
            env.create_view("best", best)
        """
        item = self._run(call(lambda: self.runtime.catalog.get(name)))
        desc = item_desc(item)
        if desc is None or kind_of(item) == "index":
            raise UsageError(f"{kind_of(item)} {name} cannot be read")
        return Get(item.id, desc)

    def create_table(
        self,
        name: str,
        desc: RelationDesc,
        *,
        constraints: Sequence[Constraint] = (),
        definition: SqlDefinition | None = None,
    ) -> GlobalId:
        """Create an empty table with columns ``desc``; return its id. Tables take writes
        through :meth:`insert`, :meth:`update` and :meth:`delete`.

        ``constraints`` (:class:`~spate.environment.catalog.UniqueConstraint`,
        :class:`~spate.environment.catalog.CheckConstraint`) are enforced on every write as
        PostgreSQL enforces them: a write breaking one raises
        :class:`~spate.errors.UniqueViolation` (23505) or :class:`~spate.errors.CheckViolation`
        (23514) and writes nothing. A primary key's columns are NOT NULL.

        ``definition`` (:class:`~spate.environment.definitions.SqlDefinition`): how SQL
        describes it, committed to the catalog with it (the SQL layer passes its statement).

        Example::

            from spate import INT64, TEXT, RelationDesc
            from spate.environment.catalog import UniqueConstraint

            env.create_table(
                "bids", RelationDesc.of(("auction", INT64, False), ("price", INT64, False),
                                        ("who", TEXT)),
                constraints=[UniqueConstraint("bids_pkey", ("auction", "price"), primary=True)],
            )
        """
        return self._run(objects.create_table(self.runtime, name, desc, constraints, definition))

    def insert(
        self, name: str, rows: Sequence[Sequence[Datum]] | pa.Table | pd.DataFrame
    ) -> WriteResult:
        """Insert ``rows`` into table ``name``, all at one timestamp. Every read that starts
        after this returns observes them. A row that does not fit the table's columns raises
        :class:`~spate.errors.SchemaMismatch` (naming the row and column) and nothing is
        written.

        ``rows`` may be an Arrow table or a pandas DataFrame with the table's column names:
        it is checked column by column (types that cast safely, no NULL in a non-null column)
        and written as it is, without Python row objects. In a DataFrame a float NaN is the
        value NaN; NULL is ``None`` or ``pd.NA``.

        Example::

            result = env.insert("bids", [(1, 10, "ann"), (1, 25, None)])
            result.rows         # 2
            env.select("bids", as_of=result.timestamp)
            env.insert("bids", pd.DataFrame({"auction": [2], "price": [7], "who": ["cy"]}))
        """
        rows, count = tables.insertable(name, rows)
        timestamp = self._run(tables.insert(self.runtime, name, rows))
        return WriteResult(timestamp=timestamp, rows=count)

    def delete(
        self,
        name: str,
        rows: Sequence[Sequence[Datum]] | None = None,
        *,
        where: Mapping[str, Datum] | None = None,
    ) -> WriteResult:
        """Delete exactly ``rows`` (each occurrence once), or every row whose columns equal
        ``where``, at one timestamp. Rows the table does not hold raise
        :class:`~spate.errors.RowsNotFound` and nothing is deleted.

        Example::

            env.delete("bids", [(1, 25, None)]).rows    # 1
            env.delete("bids", where={"auction": 1})
        """
        timestamp, count = self._run(tables.delete(self.runtime, name, rows, where=where))
        return WriteResult(timestamp=timestamp, rows=count)

    def update(
        self, name: str, changes: Sequence[tuple[Sequence[Datum], Sequence[Datum]]]
    ) -> WriteResult:
        """Replace each ``(old, new)`` row pair, all at one timestamp: no read sees one without
        the other. An ``old`` row the table does not hold raises
        :class:`~spate.errors.RowsNotFound` and nothing changes.

        Example::

            env.update("bids", [((1, 10, "ann"), (1, 12, "ann"))]).rows    # 1
        """
        changes = tables.as_list(changes, f"the (old, new) pairs to update in {name}")
        timestamp = self._run(tables.update(self.runtime, name, changes))
        return WriteResult(timestamp=timestamp, rows=len(changes))

    def pipeline(self) -> WritePipeline:
        """Table writes that do not wait for each other: each ``insert``, ``update`` or
        ``delete`` of the pipeline returns a :class:`~spate.environment.pipeline.PendingWrite`
        at once, and successive writes share group commits. They take effect in the order they
        were submitted; each is acknowledged only once durable and visible; leaving the
        ``with`` block waits for all of them (:mod:`spate.environment.pipeline`).

        Example::

            with env.pipeline() as p:
                p.insert("bids", [(3, 40, "bo")])
                p.update("bids", [((3, 40, "bo"), (3, 45, "bo"))])   # sees the insert
        """
        return WritePipeline(self.runtime, self._start)

    def transaction(self) -> Transaction:
        """Table writes committed together: the ``insert``, ``update`` and ``delete`` of the
        transaction are buffered, and leaving the ``with`` block writes all of them at one
        timestamp (durable and visible when it returns) or, if any fails, none; an exception
        out of the block discards them (:mod:`spate.environment.transaction`).

        Example::

            with env.transaction() as tx:
                tx.insert("orders", [(11, "brownie")])
                tx.delete("stock", [("brownie", 3)])
        """
        return Transaction(self.runtime, self._run)

    def _read_holds(self, timestamp: int) -> ReadHolds:
        """Read holds at ``timestamp`` on every collection and index, for a SQL read block
        (:mod:`spate.environment.read_holds`)."""
        return ReadHolds(self.runtime, self._run, self._start, timestamp)

    def create_source(
        self,
        name: str,
        connection: SourceConnection,
        *,
        tables: Sequence[str] | None = None,
        desc: RelationDesc | None = None,
        names: Mapping[str, str] | None = None,
        definition: SqlDefinition | None = None,
    ) -> dict[str, GlobalId]:
        """Create a source and its subsources, one per output, named ``<name>_<output>``
        (``names`` renames them: output -> name); return the ids by name.

        ``connection`` says where the data comes from (see :mod:`spate.sources`): a built-in
        load generator, PostgreSQL logical replication (``tables``: which tables of the
        publication, default all of them; each needs a primary key), or a directory of files
        (``desc``: their columns). A storage replica ingests it into durable collections;
        reads and views see it like a table.

        ``definition`` (:class:`~spate.environment.definitions.SqlDefinition`): how SQL
        describes it, committed to the catalog with it (the SQL layer passes its statement).

        Example::

            from spate.sources import LoadGenerator, LoadGeneratorSource, PostgresSource, Secret

            gen = LoadGeneratorSource(LoadGenerator.AUCTION, rows_per_tick=50)
            env.create_source("auction", gen)
            env.select("auction_bids", limit=5)
            env.create_source(
                "shop",
                PostgresSource(Secret("postgresql://app:pw@db/shop"), publication="p", slot="s"),
                tables=["public.orders"],
            )                                   # subsource shop_orders
        """
        return self._run(
            objects.create_source(
                self.runtime,
                name,
                connection,
                tables=tables,
                desc=desc,
                names=names,
                sql=definition,
            )
        )

    def create_view(
        self, name: str, plan: RelationExpr, *, definition: SqlDefinition | None = None
    ) -> GlobalId:
        """Name ``plan`` as a view. A view stores nothing: reads and other views inline it.

        ``definition`` (:class:`~spate.environment.definitions.SqlDefinition`): how SQL
        describes it, committed to the catalog with it (the SQL layer passes its statement).

        Example::

            env.create_view("big_bids", env.get("bids").filter(col("price") > 100))
        """
        return self._run(objects.create_view(self.runtime, name, plan, definition))

    def create_materialized_view(
        self,
        name: str,
        plan: RelationExpr,
        *,
        cluster: str | None = None,
        definition: SqlDefinition | None = None,
    ) -> GlobalId:
        """Create a materialized view: ``cluster`` (default: the only one) keeps the result of
        ``plan`` up to date incrementally and writes it to durable storage, where reads, other
        views and sinks find it. It starts at a time every input can still be read at.

        ``definition`` (:class:`~spate.environment.definitions.SqlDefinition`): how SQL
        describes it, committed to the catalog with it (the SQL layer passes its statement).

        Example::

            best = env.get("bids").reduce(["auction"], top=max_(col("price")))
            env.create_materialized_view("best", best, cluster="c")
            env.select("best")
        """
        return self._run(
            objects.create_materialized_view(self.runtime, name, plan, cluster, definition)
        )

    def create_index(
        self,
        name: str,
        *,
        on: str,
        key: Sequence[ColumnSpec],
        cluster: str | None = None,
        definition: SqlDefinition | None = None,
    ) -> GlobalId:
        """Create an index: ``cluster`` keeps ``on`` (any readable object) arranged by ``key``
        in its replicas' memory and disk, so that reads of ``on`` (and lookups by the key)
        are served by the replicas instead of from durable storage.

        ``definition`` (:class:`~spate.environment.definitions.SqlDefinition`): how SQL
        describes it, committed to the catalog with it (the SQL layer passes its statement).

        Example::

            env.create_index("best_by_auction", on="best", key=["auction"], cluster="c")
            env.select("best")                  # answered from the index
        """
        return self._run(objects.create_index(self.runtime, name, on, key, cluster, definition))

    def create_unique_index(
        self,
        name: str,
        *,
        on: str,
        key: Sequence[str],
        cluster: str | None = None,
        definition: SqlDefinition | None = None,
    ) -> GlobalId:
        """:meth:`create_index` of table ``on`` that is also a unique constraint named
        ``name`` (PostgreSQL's ``CREATE UNIQUE INDEX``): the table's rows must already have
        unique keys (else :class:`~spate.errors.UniqueViolation` and nothing is created),
        and every later write keeps them so. Dropping the index drops the constraint.

        Example::

            env.create_unique_index("bids_by_id", on="bids", key=["id"])
            env.insert("bids", [(1, 10, "ann")])
            env.insert("bids", [(1, 20, "bo")])     # UniqueViolation: Key (id)=(1) …
        """
        return self._run(
            objects.create_unique_index(self.runtime, name, on, key, cluster, definition)
        )

    def create_sink(
        self,
        name: str,
        *,
        from_: str,
        connection: SinkConnection,
        definition: SqlDefinition | None = None,
    ) -> GlobalId:
        """Write every change of ``from_`` (a table, source or materialized view) to an
        external system (see :mod:`spate.sinks`), exactly once, interval by interval, from
        now on.

        ``definition`` (:class:`~spate.environment.definitions.SqlDefinition`): how SQL
        describes it, committed to the catalog with it (the SQL layer passes its statement).

        Example::

            from spate.sinks import ParquetSinkConnection

            env.create_sink("best_out", from_="best", connection=ParquetSinkConnection("/tmp/out"))
        """
        return self._run(objects.create_sink(self.runtime, name, from_, connection, definition))

    def set_retain_history(self, name: str, duration_ms: int) -> None:
        """Keep ``name`` readable ``duration_ms`` into the past: reads with ``as_of`` up to that
        far back succeed; older times are compacted away.

        Example::

            env.set_retain_history("bids", 60_000)      # a minute of history
        """
        self._run(call(lambda: objects.set_retain_history(self.runtime, name, duration_ms)))

    def rename(self, name: str, new: str) -> None:
        """Rename ``name`` (any object) to ``new``; what reads it keeps reading it. Raises
        :class:`~spate.errors.NameExists` when ``new`` is taken.

        Example::

            env.rename("best", "best_old")
        """
        self._run(call(lambda: objects.rename(self.runtime, name, new)))

    def comment(self, name: str, text: str | None, *, column: str | None = None) -> None:
        """Set the comment of ``name`` (or of its ``column``) to ``text``; ``None`` removes it.
        Comments are kept in the catalog and dropped with their object.

        Example::

            env.comment("bids", "one row per bid")
            env.comment("bids", "in cents", column="price")
        """
        self._run(call(lambda: objects.set_comment(self.runtime, name, column, text)))

    def _commit_catalog(self, change: Callable[[CatalogState], CatalogState]) -> None:
        """Commit ``change`` (pure, validating) to the catalog in one compare-and-set: for
        changes that touch nothing but the catalog: renames, comments and views composed by a
        SQL transaction block (:mod:`spate.environment.sql_ddl_block`), SQL's secrets and
        connections (:mod:`spate.environment.sql_external`)."""
        self._run(call(lambda: self.runtime.commit(change)))

    def drop(self, name: str, *, cascade: bool = False) -> list[str]:
        """Drop ``name``; with ``cascade`` also what depends on it. Returns the names dropped.
        Without ``cascade``, an object others depend on raises
        :class:`~spate.errors.HasDependents`.

        Example::

            env.drop("bids", cascade=True)      # ['best_by_auction', 'best', 'bids']
        """
        return self._run(objects.drop(self.runtime, name, cascade=cascade))

    # -- reads -----------------------------------------------------------------------------------

    def select(
        self,
        target: str | RelationExpr,
        *,
        as_of: int | None = None,
        cluster: str | None = None,
        order_by: Sequence[str] = (),
        limit: int | None = None,
        timeout: float = 60.0,
        isolation: Isolation = "strict serializable",
        real_time_recency: bool = False,
        small_reads: bool = True,
        cancel: threading.Event | None = None,
    ) -> pa.Table:
        """The contents of ``target`` (a name or a plan) at ``as_of``. ``order_by`` names
        columns, ``-name`` for descending.

        With ``real_time_recency=True`` the read first waits until every source it reads has
        ingested everything its upstream system had committed when the read began (for
        PostgreSQL its current WAL position, for files the files present), within ``timeout``.

        Without ``as_of``, a ``"strict serializable"`` read (the default) observes every write
        acknowledged before it and the sources' data up to about the present, waiting for its
        inputs to get there; a ``"serializable"`` read answers at the latest time its inputs
        have completed, without waiting.

        A read that needs a dataflow (a join, an aggregate…) over small inputs is evaluated in
        the environment (``Settings.small_read_updates``); ``small_reads=False`` builds the
        dataflow on a replica anyway.

        A time before what ``target`` retains raises :class:`~spate.errors.ReadBeforeSince`.

        Setting ``cancel`` (from another thread) cancels the read: the call raises
        :class:`~spate.errors.QueryCanceled` at once, and a one-off dataflow the read built is
        dropped on every replica, its Spark jobs cancelled.

        Example::

            env.select("best", order_by=["-top"], limit=10)       # a pyarrow Table
            env.select("best", isolation="serializable")           # no waiting
            env.select(env.get("bids").filter(col("price") > 20))  # a query plan
        """
        check_argument(timeout, (int, float), "timeout (seconds)")
        check_argument(real_time_recency, bool, "real_time_recency")
        with self._metrics.peek():
            return self._run(
                reads.select(
                    self.runtime,
                    target,
                    as_of=as_of,
                    cluster=cluster,
                    order_by=order_by,
                    limit=limit,
                    timeout=timeout,
                    isolation=isolation,
                    real_time_recency=real_time_recency,
                    small_reads=small_reads,
                ),
                timeout * (2 if real_time_recency else 1) + 30,
                cancel,
            )

    def start_read(self, read: Coroutine[Any, Any, pa.Table]) -> Future[pa.Table]:
        """Start ``read`` (a read of :mod:`.reads`, e.g. ``reads.select(...)``) on the
        environment's event loop without waiting for it, for a caller on another event loop
        that awaits the future (pgwire's prepared lookups). Counted in the read metrics as
        :meth:`select` counts its reads.

        Example::

            future = env.start_read(reads.select(env.runtime, plan, as_of=None))
            table = await asyncio.wrap_future(future)
        """
        if not inspect.iscoroutine(read):
            raise InvalidArgument(
                "start_read takes a read coroutine (e.g. reads.select(...)), got "
                + type(read).__name__
            )
        started = time.monotonic()
        future = self._start(read)
        future.add_done_callback(
            lambda f: self._metrics.peek_done(
                started, failed=f.cancelled() or f.exception() is not None
            )
        )
        return future

    def read_done(self, started: float) -> None:
        """Count in the read metrics, as :meth:`select` counts its reads, a read answered
        outside the environment's loop (a pgwire lookup answered from memory) that started at
        ``started`` (``time.monotonic()``). Safe from any thread.

        Example::

            started = time.monotonic()
            ...  # the read
            env.read_done(started)
        """
        self._metrics.read_at_once_done(started)

    def select_seen(
        self, route: ReadPlan, *, as_of: int | None, isolation: Isolation
    ) -> pa.Table | None:
        """:meth:`select` of the read ``route`` answered on the calling thread when its
        inputs' contents are cached here and final (:func:`~spate.environment.reads.select_seen`:
        no hop to the environment's loop); ``None``: call :meth:`select`. SQL reads try it
        first; it is for callers that have already planned their read.

        Example::

            route = read_plan.plan_read(env.runtime, plan, None)
            rows = env.select_seen(route, as_of=None, isolation="strict serializable")
            if rows is None:
                rows = env.select(plan)
        """
        if self._rt is None or (
            self._background is not None and self._background.failure() is not None
        ):
            return None  # select raises what is wrong
        started = time.monotonic()
        found = reads.select_seen(self._rt, route, as_of=as_of, isolation=isolation)
        if found is not None:
            self._metrics.peek_done(started, failed=False)
        return found

    def select_pandas(self, target: str | RelationExpr, **kwargs: Any) -> pd.DataFrame:
        """:meth:`select`, as a pandas DataFrame (same keyword arguments).

        Example::

            env.select_pandas("best", order_by=["auction"]).head()
        """
        unknown = sorted(set(kwargs) - _SELECT_KEYWORDS)
        if unknown:
            raise InvalidArgument(
                f"select_pandas got an unexpected keyword argument {', '.join(map(repr, unknown))}"
                f"; it takes those of select: {', '.join(sorted(_SELECT_KEYWORDS))}"
            )
        frame: pd.DataFrame = self.select(target, **kwargs).to_pandas()
        return frame

    def subscribe(
        self,
        target: str | RelationExpr,
        *,
        as_of: int | None = None,
        up_to: int | None = None,
        cluster: str | None = None,
        with_snapshot: bool = True,
        timeout: float | None = None,
        progress: bool = False,
    ) -> Iterator[Changes]:
        """Changes of ``target`` as ``[(time, row, diff), ...]`` per closed interval: first the
        contents at ``as_of`` (unless ``with_snapshot=False``), then every change, until
        ``up_to`` (exclusive) or until the iterator is closed. Each row is a named tuple of
        the columns; each batch's ``upper`` says every change before it has arrived. Intervals
        in which nothing changed are skipped unless ``progress=True`` (then they arrive as
        empty batches whose ``upper`` moves on). ``timeout`` bounds the wait for each batch.

        Example::

            for changes in env.subscribe("best", up_to=t_end):
                for time, row, diff in changes:
                    print(time, row.auction, diff)   # diff -1 retracts a row, +1 adds one
        """
        check_argument(progress, bool, "progress")
        check_argument(with_snapshot, bool, "with_snapshot")
        if timeout is not None:
            check_timeout(timeout)
        stream = reads.subscribe(
            self.runtime,
            target,
            as_of=as_of,
            up_to=up_to,
            cluster=cluster,
            with_snapshot=with_snapshot,
            progress=progress,
        )
        return self._changes(stream, timeout)

    def _changes(
        self, stream: AsyncGenerator[Changes, None], timeout: float | None
    ) -> Iterator[Changes]:
        try:
            while True:
                try:
                    yield self._run(next_of(stream), timeout)
                except StopAsyncIteration:
                    return
        finally:
            if self._rt is not None:
                self._run(_close(stream), 60)


async def _close(stream: AsyncGenerator[Changes, None]) -> None:
    """Close a subscribe's stream; a wait for its next batch that was canceled (Ctrl-C) may
    still be unwinding, and closing a running generator fails."""
    for _ in range(500):
        if not getattr(stream, "ag_running", False):
            break
        await asyncio.sleep(0.01)
    await stream.aclose()


_SELECT_KEYWORDS = frozenset(
    p
    for p in inspect.signature(EnvironmentOperations.select).parameters
    if p not in ("self", "target")
)
