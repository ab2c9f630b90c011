"""``spate.Environment``: the Python API.

::

    env = Environment.open("data")
    env.create_cluster("c1", replicas=2)
    env.create_table("bids", RelationDesc.of(("auction", INT64, False), ("price", INT64, False)))
    env.insert("bids", [(1, 10), (1, 25), (2, 7)])
    top = env.get("bids").reduce(["auction"], top=max_(col("price")))
    env.create_materialized_view("top_bids", top, cluster="c1")
    env.create_index("top_bids_by_auction", on="top_bids", key=["auction"])
    env.select("top_bids")                      # a pyarrow Table, consistent with every insert
    for changes in env.subscribe("top_bids"):   # [(time, row, diff), ...] per closed interval
        ...
    env.close()

Every method is synchronous and thread-safe: the environment runs its controllers on an event
loop in a thread of its own, and each call is carried out there. Every call validates first and
either happens completely or not at all; errors name the objects, columns and frontiers.
Reopening the same data directory restores everything: catalog, clusters, dataflows, data.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from spate.config import Settings, load_settings
from spate.environment import clusters, objects, reads, tables
from spate.environment.catalog import item_desc, kind_of
from spate.environment.core import Background, close_runtime, open_runtime
from spate.environment.runtime import Runtime
from spate.environment.status import EnvironmentStatus, collect
from spate.errors import EnvironmentClosed as EnvironmentClosed
from spate.errors import UsageError
from spate.ids import GlobalId
from spate.orchestrator.supervisor import Supervisor
from spate.plan.builder import ColumnSpec
from spate.plan.relation import Get, RelationExpr
from spate.protocol.storage_desc import SinkConnection, SourceConnection
from spate.repr.desc import RelationDesc
from spate.repr.types import Datum, Row

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")


class Environment:
    """An open spate environment. Create with :meth:`open`; close with :meth:`close`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self._loop = loop
        self._thread = thread
        self._rt: Runtime | None = None
        self._background: Background | None = None
        self._sql: tuple[Any, Any] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: str | Path | None = None,
        *,
        settings: Settings | None = None,
        spark_master: str | None = None,
        orchestrator: Supervisor | None = None,
        timeout: float = 300.0,
    ) -> Environment:
        """Open (or create) the environment stored in ``data_dir``.

        ``settings`` (default: :func:`spate.config.load_settings`: ``SPATE_*`` variables and the
        ``SPATE_CONFIG`` file) say where persist keeps the data, how replicas run Spark, where
        replicas placed elsewhere listen…; ``data_dir`` and ``spark_master`` override theirs.
        """
        if settings is None:
            settings = load_settings()
        if spark_master is not None:
            settings = settings.model_copy(
                update={"spark": settings.spark.model_copy(update={"master": spark_master})}
            )
        if data_dir is not None:
            settings = settings.model_copy(update={"data_dir": Path(data_dir)})
        data_dir = settings.data_dir
        logging.getLogger("spate").setLevel(settings.log_level)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="spate-environment", daemon=True)
        thread.start()
        env = cls(loop, thread)
        try:
            env._rt = env._submit(
                open_runtime(Path(data_dir), settings=settings, orchestrator=orchestrator), timeout
            )
            env._background = env._submit(_start(env._rt), timeout)
        except BaseException:
            env._stop_loop()
            raise
        return env

    def close(self, *, stop_replicas: bool = True, timeout: float = 120.0) -> None:
        """Stop the controllers; with ``stop_replicas=False`` replica processes keep running and
        the next :meth:`open` of this data directory adopts them."""
        if self._rt is None:
            return
        rt, background = self._rt, self._background
        self._rt = None
        try:
            if background is not None:
                self._submit(background.stop(), timeout)
            self._submit(close_runtime(rt, stop_replicas=stop_replicas), timeout)
        finally:
            self._stop_loop()

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._loop.close()

    def _submit(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 300.0) -> T:
        if self._rt is None:
            coro.close()
            raise EnvironmentClosed("the environment is closed")
        if self._background is not None:
            failure = self._background.failure()
            if failure is not None:
                coro.close()
                raise EnvironmentClosed(f"the environment stopped working: {failure}") from failure
        return self._submit(coro, timeout)

    @property
    def runtime(self) -> Runtime:
        """The running parts (controllers, catalog…), for introspection and tests."""
        if self._rt is None:
            raise EnvironmentClosed("the environment is closed")
        return self._rt

    # -- clusters --------------------------------------------------------------------------------

    def create_cluster(self, name: str, *, replicas: int | Sequence[str] = 1) -> None:
        """A compute cluster with ``replicas`` replica processes (a count, or names)."""
        names = clusters.replica_names(replicas)
        self._run(clusters.create_cluster(self.runtime, name, names))

    def add_replica(self, cluster: str, name: str) -> None:
        self._run(clusters.add_replica(self.runtime, cluster, name))

    def drop_replica(self, cluster: str, name: str) -> None:
        self._run(clusters.drop_replica(self.runtime, cluster, name))

    def drop_cluster(self, name: str) -> None:
        self._run(clusters.drop_cluster(self.runtime, name))

    # -- objects ---------------------------------------------------------------------------------

    def get(self, name: str) -> Get:
        """A plan reading ``name`` (a table, source, view or materialized view)."""
        item = self._run(_call(lambda: self.runtime.catalog.get(name)))
        desc = item_desc(item)
        if desc is None or kind_of(item) == "index":
            raise UsageError(f"{kind_of(item)} {name} cannot be read")
        return Get(item.id, desc)

    def create_table(self, name: str, desc: RelationDesc) -> GlobalId:
        return self._run(objects.create_table(self.runtime, name, desc))

    def insert(self, name: str, rows: Sequence[Sequence[Datum]]) -> int:
        """Insert ``rows``; return the write timestamp. Later reads observe them."""
        return self._run(tables.insert(self.runtime, name, rows))

    def delete(
        self,
        name: str,
        rows: Sequence[Sequence[Datum]] | None = None,
        *,
        where: Mapping[str, Datum] | None = None,
    ) -> int:
        """Delete exactly ``rows``, or every row whose columns equal ``where``. Returns how
        many rows were deleted."""
        return self._run(tables.delete(self.runtime, name, rows, where=where))[1]

    def update(self, name: str, changes: Sequence[tuple[Sequence[Datum], Sequence[Datum]]]) -> int:
        """Replace each ``(old, new)`` row pair atomically; return the write timestamp."""
        return self._run(tables.update(self.runtime, name, changes))

    def create_source(
        self,
        name: str,
        connection: SourceConnection,
        *,
        tables: Sequence[str] | None = None,
        desc: RelationDesc | None = None,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, GlobalId]:
        """A source and its subsources (``<name>_<output>``): load generator, PostgreSQL
        (``tables``, default: the whole publication), or a directory of files (``desc``)."""
        return self._run(
            objects.create_source(
                self.runtime, name, connection, tables=tables, desc=desc, names=names
            )
        )

    def create_view(self, name: str, plan: RelationExpr) -> GlobalId:
        return self._run(objects.create_view(self.runtime, name, plan))

    def create_materialized_view(
        self, name: str, plan: RelationExpr, *, cluster: str | None = None
    ) -> GlobalId:
        return self._run(objects.create_materialized_view(self.runtime, name, plan, cluster))

    def create_index(
        self, name: str, *, on: str, key: Sequence[ColumnSpec], cluster: str | None = None
    ) -> GlobalId:
        return self._run(objects.create_index(self.runtime, name, on, key, cluster))

    def create_sink(self, name: str, *, from_: str, connection: SinkConnection) -> GlobalId:
        return self._run(objects.create_sink(self.runtime, name, from_, connection))

    def set_retain_history(self, name: str, duration_ms: int) -> None:
        """Keep ``name`` readable ``duration_ms`` into the past."""
        self._run(_call(lambda: objects.set_retain_history(self.runtime, name, duration_ms)))

    def drop(self, name: str, *, cascade: bool = False) -> list[str]:
        """Drop ``name``; with ``cascade`` also what depends on it. Returns what was dropped."""
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
        isolation: str = "strict serializable",
    ) -> pa.Table:
        """The contents of ``target`` (a name or a plan) at ``as_of``. ``order_by`` names
        columns, ``-name`` for descending.

        Without ``as_of``, a ``"strict serializable"`` read (the default) observes every write
        acknowledged before it and the sources' data up to about the present, waiting for its
        inputs to get there; a ``"serializable"`` read answers at the latest time its inputs
        have completed, without waiting."""
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
            ),
            timeout + 30,
        )

    def select_pandas(self, target: str | RelationExpr, **kwargs: Any) -> pd.DataFrame:
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
    ) -> Iterator[list[tuple[int, Row, int]]]:
        """Changes of ``target`` as ``[(time, row, diff), ...]`` per closed interval: first the
        contents at ``as_of`` (unless ``with_snapshot=False``), then every change, until
        ``up_to`` (exclusive) or until the iterator is closed."""
        stream = reads.subscribe(
            self.runtime,
            target,
            as_of=as_of,
            up_to=up_to,
            cluster=cluster,
            with_snapshot=with_snapshot,
        )
        try:
            while True:
                try:
                    yield self._run(_next(stream), timeout)
                except StopAsyncIteration:
                    return
        finally:
            if self._rt is not None:
                self._run(stream.aclose(), 60)

    # -- SQL -------------------------------------------------------------------------------------

    def sql(
        self, text: str, *, dialect: str = "postgres"
    ) -> pa.Table | Iterator[list[tuple[int, Row, int]]] | None:
        """Run one or more ``;``-separated SQL statements; return the last one's result: a
        ``pyarrow.Table`` for SELECT, SHOW and EXPLAIN, the iterator of :meth:`subscribe` for
        SUBSCRIBE, ``None`` otherwise. ``dialect`` is ``"postgres"`` (as Materialize speaks
        it) or ``"spark"``. A statement that fails raises :class:`spate.sql.SqlError` (or the
        error of the operation it ran) and changes nothing; earlier statements stay done."""
        from spate.environment import sql as sql_exec

        if self._sql is None:
            self._sql = (
                sql_exec.Session(),
                sql_exec.Definitions(self.runtime.layout.data_dir),
            )
        session, definitions = self._sql
        return sql_exec.run(self, text, dialect, session, definitions)

    def status(self) -> EnvironmentStatus:
        return self._run(_call(lambda: collect(self.runtime)))

    def names(self) -> list[str]:
        return self._run(_call(lambda: sorted(i.name for i in self.runtime.catalog)))


async def _call(fn: Callable[[], T]) -> T:
    return fn()


async def _next(stream: AsyncGenerator[T, None]) -> T:
    return await stream.__anext__()


async def _start(rt: Runtime) -> Background:
    return Background(rt)
