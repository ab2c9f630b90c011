"""The running side of an :class:`~spate.environment.api.Environment`: opening and closing it,
the event loop thread every call is carried out on, and its status.

The environment runs its controllers on an event loop in a thread of its own; each call from any
thread is submitted there and waited for (:meth:`EnvironmentBase._run`), under a timeout that
raises :class:`~spate.errors.CallTimeout`. A call on a closed environment, or on one whose
background tasks failed, raises :class:`~spate.errors.EnvironmentClosed`. The operations are
added on top by :class:`~spate.environment.operations.EnvironmentOperations`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

from spate.config import Settings, load_settings
from spate.environment import hydration
from spate.environment.core import Background, close_runtime, open_runtime
from spate.environment.metrics import EnvironmentMetrics
from spate.environment.runtime import Runtime
from spate.environment.services import local_replica_metrics_ports
from spate.environment.status import EnvironmentStatus, collect
from spate.errors import (
    CallTimeout,
    EnvironmentClosed,
    InvalidArgument,
    InvalidArgumentValue,
    QueryCanceled,
    check_argument,
)
from spate.orchestrator.supervisor import Supervisor
from spate.storage.controller.errors import ControllerFenced

if TYPE_CHECKING:
    from spate.environment.webhook.server import WebhookServer

T = TypeVar("T")


class EnvironmentBase:
    """An open environment without its operations: how it opens and closes, how a call reaches
    its event loop, and what it reports about itself. Use :class:`spate.Environment`.

    Example::

        with spate.Environment.open("spate-data") as env:
            env.status()
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self._loop = loop
        self._thread = thread
        self._rt: Runtime | None = None
        self._background: Background | None = None
        self._metrics = EnvironmentMetrics()
        self._webhooks: WebhookServer | None = None

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
    ) -> Self:
        """Open (or create) the environment stored in ``data_dir``.

        Reopening a data directory restores everything in it: the catalog, clusters and their
        replicas, dataflows and data. ``settings`` (default: :func:`spate.config.load_settings`:
        ``SPATE_*`` variables and the ``SPATE_CONFIG`` file) say where persist keeps the data,
        how replicas run Spark, where replicas placed elsewhere listen…; ``data_dir`` and
        ``spark_master`` override theirs.

        Example::

            env = spate.Environment.open("spate-data")
            try:
                print(env.names())
            finally:
                env.close()
        """
        if data_dir is not None:
            check_argument(data_dir, (str, Path), "data_dir (a directory path)")
        if settings is not None:
            check_argument(settings, Settings, "settings (spate.config.Settings)")
        if spark_master is not None:
            check_argument(spark_master, str, "spark_master")
        check_timeout(timeout)
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
            env._serve_metrics(env._rt)
            env._serve_webhooks(env._rt)
        except BaseException:
            env._metrics.close()
            if env._webhooks is not None:
                env._webhooks.close()
            env._stop_loop()
            raise
        return env

    def _serve_metrics(self, rt: Runtime) -> None:
        self._metrics.watch(
            self._loop, lambda: collect(rt), lambda: local_replica_metrics_ports(rt.orchestrator)
        )
        if rt.settings.metrics_port is not None:
            self._metrics.serve(rt.settings.metrics_host, rt.settings.metrics_port)

    def _serve_webhooks(self, rt: Runtime) -> None:
        s = rt.settings
        if s.webhook_port is not None:
            from spate.environment.webhook.serve import serve

            self._webhooks = serve(self, s.webhook_host, s.webhook_port, s.webhook_max_body_bytes)

    @property
    def webhook_url(self) -> str | None:
        """Where webhook sources take POSTs (``webhook_port`` setting), if served.

        Example::

            env.webhook_url    # 'http://127.0.0.1:6876/api/webhook', or None
            # POST {env.webhook_url}/materialize/public/<source>
        """
        if self._webhooks is None or self._rt is None:
            return None
        return f"http://{self._rt.settings.webhook_host}:{self._webhooks.port}/api/webhook"

    @property
    def metrics_url(self) -> str | None:
        """Where the Prometheus endpoint serves (``metrics_port`` setting), if it does.

        Example::

            env.metrics_url         # 'http://127.0.0.1:9464/metrics', or None
        """
        port = self._metrics.port
        if port is None or self._rt is None:
            return None
        return f"http://{self._rt.settings.metrics_host}:{port}/metrics"

    def close(self, *, stop_replicas: bool = True, timeout: float = 120.0) -> None:
        """Stop the controllers; with ``stop_replicas=False`` replica processes keep running and
        the next :meth:`open` of this data directory adopts them. Closing twice is harmless;
        every other call on a closed environment raises :class:`~spate.errors.EnvironmentClosed`.

        Example::

            env.close(stop_replicas=False)      # replicas keep their state warm
            env = spate.Environment.open("spate-data")   # and are adopted here
        """
        check_argument(stop_replicas, bool, "stop_replicas")
        check_timeout(timeout)
        if self._rt is None:
            return
        rt, background = self._rt, self._background
        self._rt = None
        self._metrics.close()
        if self._webhooks is not None:
            self._webhooks.close()
            self._webhooks = None
        try:
            if background is not None:
                self._submit(background.stop(), timeout)
            self._submit(close_runtime(rt, stop_replicas=stop_replicas), timeout)
        finally:
            self._stop_loop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stop_loop(self) -> None:
        if self._thread.is_alive():
            # calls other threads still wait for end now (EnvironmentClosed), not at their timeout
            with contextlib.suppress(TimeoutError, RuntimeError):
                asyncio.run_coroutine_threadsafe(_cancel_pending(), self._loop).result(
                    CANCEL_PENDING_S + 5
                )
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._loop.close()

    def _submit(
        self,
        coro: Coroutine[Any, Any, T],
        timeout: float | None,
        cancel: threading.Event | None = None,
    ) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            if cancel is None:
                return future.result(timeout)
            return _result_unless_canceled(future, timeout, cancel)
        except TimeoutError:
            future.cancel()
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise future.exception() from None  # type: ignore[misc]
            raise CallTimeout(
                f"the call did not finish within {timeout} s (it was canceled)"
            ) from None
        except KeyboardInterrupt:  # Ctrl-C while waiting: the call is canceled too
            future.cancel()
            raise
        except CancelledError:
            if self._rt is None:
                raise EnvironmentClosed(
                    "the environment was closed while this call waited"
                ) from None
            raise

    def _start(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coro`` on the event loop without waiting for it (as :meth:`_run` checks).
        Calls started from one thread start on the loop in the order they were made."""
        self._check_open(coro)
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _check_open(self, coro: Coroutine[Any, Any, object]) -> None:
        if self._rt is None:
            coro.close()
            raise EnvironmentClosed("the environment is closed")
        if self._background is not None:
            failure = self._background.failure()
            if failure is not None:
                coro.close()
                if isinstance(failure, ControllerFenced):
                    # a newer environment opened the data directory: say so, not "closed"
                    raise failure.with_traceback(None)
                raise EnvironmentClosed(f"the environment stopped working: {failure}") from failure

    def _run(
        self,
        coro: Coroutine[Any, Any, T],
        timeout: float | None = 300.0,
        cancel: threading.Event | None = None,
    ) -> T:
        """``coro`` carried out on the environment's loop; with ``cancel``, setting that event
        (from any thread) cancels it there and raises :class:`QueryCanceled` here."""
        self._check_open(coro)
        operation = getattr(coro, "__name__", "call")
        try:
            return self._submit(coro, timeout, cancel)
        except Exception as e:
            self._metrics.error(operation, e)
            raise

    @property
    def runtime(self) -> Runtime:
        """The running parts (controllers, catalog…), for introspection and tests. Not a stable
        interface.

        Example::

            env.runtime.catalog.get("bids").id    # GlobalId('u1')
        """
        if self._rt is None:
            raise EnvironmentClosed("the environment is closed")
        return self._rt

    # -- status ----------------------------------------------------------------------------------

    def status(self) -> EnvironmentStatus:
        """A snapshot of every collection's since and upper, and of the replicas' health.

        Example::

            env.status().collection("best").upper
        """
        return self._run(collect(self.runtime))

    def wait_hydrated(
        self,
        timeout: float = 300.0,
        *,
        progress: Callable[[EnvironmentStatus], None] | None = None,
    ) -> EnvironmentStatus:
        """Wait until every materialized view and index (of a cluster with replicas) has
        hydrated on at least one replica; ``progress(status)`` is called as it goes. Returns the
        last status; raises :class:`~spate.environment.hydration.HydrationTimeout` (a
        ``TimeoutError``) naming what has not hydrated after ``timeout`` seconds.

        Example::

            env.create_materialized_view("best", plan, cluster="c")
            env.wait_hydrated(timeout=120)
        """
        check_timeout(timeout)
        if progress is not None and not callable(progress):
            raise InvalidArgument(
                f"progress must be a function of the status, got {type(progress).__name__}"
            )
        return hydration.wait_hydrated(self.status, timeout, progress)

    def names(self) -> list[str]:
        """The names of every object in the catalog, sorted.

        Example::

            env.names()         # ['best', 'best_by_auction', 'bids']
        """
        return self._run(call(lambda: sorted(i.name for i in self.runtime.catalog)))


CANCEL_PENDING_S: Final = 5.0
"""How long :meth:`EnvironmentBase.close` lets the calls it cancels finish their cleanup."""


async def _cancel_pending() -> None:
    """Cancel every task still on the environment's loop once the runtime is closed: the
    threads waiting for them learn at once that the environment closed."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=CANCEL_PENDING_S)


CANCEL_POLL_S: Final = 0.02
"""How often a cancelable call looks at its cancel event."""


def _result_unless_canceled(future: Future[T], timeout: float | None, cancel: threading.Event) -> T:
    """``future``'s result within ``timeout`` (else ``TimeoutError``), unless ``cancel`` is set
    first: then ``future`` is cancelled and :class:`QueryCanceled` raised."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if cancel.is_set():
            future.cancel()
            raise QueryCanceled("the read was canceled")
        wait = CANCEL_POLL_S
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError
        try:
            return future.result(wait)
        except TimeoutError:
            if future.done():
                raise  # the call itself raised a TimeoutError


def check_timeout(timeout: object) -> None:
    """Refuse a timeout that is not a positive number of seconds."""
    check_argument(timeout, (int, float), "timeout (seconds)")
    assert isinstance(timeout, (int, float))
    if not timeout > 0:
        raise InvalidArgumentValue(f"timeout must be more than 0 s, got {timeout}")


async def call(fn: Callable[[], T]) -> T:
    """``fn()``, as a coroutine for :meth:`EnvironmentBase._run` (run on the loop's thread)."""
    return fn()


async def next_of(stream: AsyncGenerator[T, None]) -> T:
    """The next item of ``stream``, as a coroutine for :meth:`EnvironmentBase._run`."""
    return await stream.__anext__()


async def _start(rt: Runtime) -> Background:
    return Background(rt)
