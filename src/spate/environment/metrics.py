"""The environment's Prometheus endpoint (``metrics_port`` setting; off by default).

``GET http://<metrics_host>:<metrics_port>/metrics`` answers in the Prometheus text format.
Gauges are read from the running environment at scrape time (the same numbers as
``Environment.status()``); counters and histograms count since the environment opened.

=====================================================  ============================================
series                                                 meaning
=====================================================  ============================================
``spate_epoch``                                        this environment's epoch
``spate_read_timestamp_ms``                            the timestamp oracle's read timestamp
``spate_collection_since_ms{name,kind,cluster}``       a collection's since (absent: empty)
``spate_collection_upper_ms{name,kind,cluster}``       its upper: data complete before this time
``spate_collection_lag_seconds{name,kind,cluster}``    wall clock minus upper (freshness)
``spate_collection_hydrated{name,kind,cluster}``       1 once a view or index has hydrated
``spate_replica_connected{cluster,replica}``           1 while the controller is connected to it
``spate_replica_restarts{cluster,replica}``            times its process was restarted
``spate_replica_hydrated_collections{cluster,replica}`` collections it has hydrated
``spate_peeks_total{outcome}``                         reads (``select``) by outcome (ok, error)
``spate_peek_seconds``                                 time per read (histogram)
``spate_errors_total{operation,error}``                failed API calls by operation and error type
``spate_compute_replica_*{replica}``                   each local compute replica's own series
                                                       (step times, steps, failures, peeks…),
                                                       collected from it at scrape time
=====================================================  ============================================
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from spate.environment.status import EnvironmentStatus

_log: Final = logging.getLogger("spate.environment.metrics")
_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SCRAPE_TIMEOUT_S: Final = 2.0
QUICK_BATCH: Final = 4096
"""Reads answered at once counted in bulk (:meth:`EnvironmentMetrics.read_at_once_done`) go
into the series at the latest after this many (and at every collection)."""


class _StatusCollector(Collector):
    def __init__(
        self, status: Callable[[], EnvironmentStatus], replicas: Callable[[], list[int]]
    ) -> None:
        self._status = status
        self._replicas = replicas

    def collect(self) -> Iterable[Metric]:
        try:
            s = self._status()
        except Exception as e:  # a closing environment: report nothing rather than fail
            _log.debug("metrics: no status: %s", e)
            return []
        out: list[Metric] = []
        g = GaugeMetricFamily
        out.append(g("spate_epoch", "This environment's epoch", value=s.epoch))
        out.append(g("spate_read_timestamp_ms", "The read timestamp", value=s.read_ts))
        labels = ["name", "kind", "cluster"]
        since = g("spate_collection_since_ms", "A collection's since", labels=labels)
        upper = g("spate_collection_upper_ms", "A collection's upper", labels=labels)
        lag = g("spate_collection_lag_seconds", "Wall clock minus upper", labels=labels)
        hyd = g("spate_collection_hydrated", "1 once hydrated", labels=labels)
        for c in s.collections:
            key = [c.name, c.kind, c.cluster or ""]
            if (t := c.since.as_option()) is not None:
                since.add_metric(key, t)
            if (t := c.upper.as_option()) is not None:
                upper.add_metric(key, t)
            if c.lag_ms is not None:
                lag.add_metric(key, c.lag_ms / 1000)
            if c.hydrated is not None:
                hyd.add_metric(key, 1 if c.hydrated else 0)
        out += [since, upper, lag, hyd]
        rl = ["cluster", "replica"]
        conn = g("spate_replica_connected", "1 while connected", labels=rl)
        restarts = g("spate_replica_restarts", "Process restarts", labels=rl)
        hydrated = g("spate_replica_hydrated_collections", "Hydrated collections", labels=rl)
        for r in s.replicas:
            conn.add_metric([r.cluster, r.name], 1 if r.health == "connected" else 0)
            restarts.add_metric([r.cluster, r.name], r.restarts)
            hydrated.add_metric([r.cluster, r.name], r.hydrated)
        out += [conn, restarts, hydrated]
        out += _federate(self._replicas())
        return out


def _federate(ports: list[int]) -> list[Metric]:
    """The ``spate_compute_replica_*`` families of the local replicas' endpoints, merged by
    name (each sample carries its ``replica`` label)."""
    merged: dict[str, Metric] = {}
    for port in ports:
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as r:
                text = r.read().decode()
        except OSError as e:
            _log.debug("metrics: replica endpoint %s: %s", url, e)
            continue
        for fam in text_string_to_metric_families(text):
            if not fam.name.startswith("spate_compute_replica_"):
                continue
            into = merged.get(fam.name)
            if into is None:
                into = merged[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            into.samples.extend(fam.samples)
    return list(merged.values())


class _QuickReads(Collector):
    """No series of its own: collecting it first adds the reads counted in bulk
    (:meth:`EnvironmentMetrics.read_at_once_done`) to the series collected after it."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush

    def collect(self) -> Iterable[Metric]:
        self._flush()
        return ()


class EnvironmentMetrics:
    """One environment's registry, counters and (optionally) its HTTP endpoint."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._quick_lock = threading.Lock()
        self._quick_n = 0
        self._quick_seconds = 0.0
        # Registered before the series it adds to: a collection counts every read before it.
        self.registry.register(_QuickReads(self.flush_quick))
        self.peeks = Counter("spate_peeks", "Reads by outcome", ["outcome"], registry=self.registry)
        self._peeks_ok: Any = None  # the "ok" child, found at the first read (then kept)
        self.peek_seconds = Histogram(
            "spate_peek_seconds", "Time per read", buckets=_BUCKETS, registry=self.registry
        )
        self.errors = Counter(
            "spate_errors", "Failed API calls", ["operation", "error"], registry=self.registry
        )
        self._server: WSGIServer | None = None
        self.port: int | None = None

    def watch(
        self,
        loop: asyncio.AbstractEventLoop,
        status: Callable[[], Awaitable[EnvironmentStatus]],
        replica_ports: Callable[[], list[int]],
    ) -> None:
        """Report ``status()`` (run on ``loop``) and the local replicas' own series."""

        def on_loop() -> EnvironmentStatus:
            async def call() -> EnvironmentStatus:
                return await status()

            return asyncio.run_coroutine_threadsafe(call(), loop).result(SCRAPE_TIMEOUT_S)

        def ports() -> list[int]:
            async def call() -> list[int]:
                return replica_ports()

            try:
                return asyncio.run_coroutine_threadsafe(call(), loop).result(SCRAPE_TIMEOUT_S)
            except Exception:
                return []

        self.registry.register(_StatusCollector(on_loop, ports))

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (0: any free port); return the port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        self.port = int(server.server_address[1])
        _log.info("metrics on http://%s:%d/metrics", host, self.port)
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @contextmanager
    def peek(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        except Exception:
            self.peek_done(started, failed=True)
            raise
        self.peek_done(started, failed=False)

    def peek_done(self, started: float, *, failed: bool) -> None:
        """A read started at ``started`` (``time.monotonic()``) ended, failed or not."""
        self.peek_seconds.observe(time.monotonic() - started)
        if failed:
            self.peeks.labels("error").inc()
            return
        ok = self._peeks_ok
        if ok is None:
            ok = self._peeks_ok = self.peeks.labels("ok")
        ok.inc()

    def read_at_once_done(self, started: float) -> None:
        """A read answered at once (in memory, on the calling thread) that started at
        ``started`` (``time.monotonic()``) ended: counted as :meth:`peek_done` counts a read,
        in bulk. Such a read takes microseconds, and an observation of the histogram costs
        about as much again (a lock and a search per series); one that took less than the
        histogram's first bucket adds to two numbers here, which :meth:`flush_quick` adds to
        the series (at each collection, and every :data:`QUICK_BATCH` reads)."""
        elapsed = time.monotonic() - started
        if elapsed > _BUCKETS[0]:
            self.peek_done(started, failed=False)
            return
        with self._quick_lock:
            self._quick_n += 1
            self._quick_seconds += elapsed
            due = self._quick_n >= QUICK_BATCH
        if due:
            self.flush_quick()

    def flush_quick(self) -> None:
        """Add the reads :meth:`read_at_once_done` counted to ``spate_peeks_total`` and
        ``spate_peek_seconds`` (all in its first bucket)."""
        with self._quick_lock:
            n, seconds = self._quick_n, self._quick_seconds
            self._quick_n, self._quick_seconds = 0, 0.0
        if not n:
            return
        ok = self._peeks_ok
        if ok is None:
            ok = self._peeks_ok = self.peeks.labels("ok")
        ok.inc(n)
        # prometheus_client's Histogram observes one value at a time; its first bucket and
        # its sum are values that add any amount (``inc``), which is what many reads add.
        hist = self.peek_seconds
        buckets = getattr(hist, "_buckets", None)
        total = getattr(hist, "_sum", None)
        if buckets and total is not None:
            buckets[0].inc(n)
            total.inc(seconds)
            return
        for _ in range(n):  # not the layout above: one observation each (the mean)
            hist.observe(seconds / n)

    def error(self, operation: str, e: BaseException) -> None:
        self.errors.labels(operation, type(e).__name__).inc()
