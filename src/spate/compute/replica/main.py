"""The compute replica process: ``spate replica --role compute``.

::

    spate replica --role compute --listen 127.0.0.1:PORT --secret-file F --scratch-dir D \
        [--spark-master local[2]] [--persist-blob URI --persist-consensus URI] \
        [--replica-id r1] [--metrics-port N] [--driver-memory 1g] \
        [--spark-conf spark.KEY=VALUE ...] [--grace-period SECONDS]

* Listens on ``--listen`` (loopback by default; a non-loopback address needs a secret) and
  prints one line ``spate compute replica listening on HOST:PORT`` once it accepts connections
  (useful with port 0). It starts its SparkSession (one per process) in the background right
  away; commands that need Spark wait for it.
* ``--secret-file``: the shared transport secret: the file's text (surrounding whitespace
  removed), as :meth:`spate.protocol.secret.Secret.from_file` reads it — the same secret the
  environment's controllers and the storage replicas use. Never logged.
* ``--scratch-dir``: owned by this process (arrangement batches, step files); locked while the
  process runs (a second process on the same directory refuses to start) and emptied at start.
* ``--persist-blob``/``--persist-consensus``: where source imports and materialized views live
  (``file:///…`` + ``sqlite:///…`` embedded; ``s3://…`` + ``postgresql://…`` scaled out).
* ``--metrics-port``: serve Prometheus metrics on 127.0.0.1 at that port (opt-in).
* ``--spark-conf``: ``spark.*`` settings for the replica's session (the driver's bind and
  advertised address, executor sizes…); they win over spate's defaults.
* ``--grace-period``: exit once no controller has held the replica for this many seconds
  (:mod:`spate.protocol.idle`); without it the replica runs until stopped.
* Exit codes: 0 after SIGTERM/SIGINT, :data:`HALT_EXIT_CODE` after a halt (an incompatible
  ``CreateInstance`` on reconnection), :data:`JVM_EXIT_CODE` when its Spark JVM died (killed,
  out of memory): a replica without its JVM could only fail every step, so it exits at once
  (:func:`spate.render.spark.exit_when_jvm_dies`) and the orchestrator restarts a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import ssl
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spate.compute.replica.actions import Event
from spate.compute.replica.metrics import ReplicaMetrics
from spate.compute.replica.render_api import Renderer
from spate.compute.replica.runtime import ComputeRuntime
from spate.compute.replica.server import ComputeReplica
from spate.compute.replica.state import ReplicaState
from spate.ids import IdGen, SystemIdGen
from spate.persist.client import PersistClient
from spate.persist.location import PersistLocation
from spate.protocol.idle import Handler, IdleExit
from spate.protocol.secret import Secret
from spate.protocol.transport import serve

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log: Final = logging.getLogger("spate.compute.replica")

HALT_EXIT_CODE: Final = 3
JVM_EXIT_CODE: Final = 4
READY_LINE: Final = "spate compute replica listening on"


def read_secret_file(path: Path) -> Secret:
    """The transport secret in ``path`` (module docs)."""
    return Secret.from_file(path)


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as ``(host, port)``."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--listen must be HOST:PORT, got {listen!r}")
    return host.strip("[]"), int(port)


@contextlib.contextmanager
def owned_scratch_dir(path: Path) -> Iterator[Path]:
    """Lock ``path`` for this process and empty its working area (module docs)."""
    path.mkdir(parents=True, exist_ok=True)
    lock = open(path / ".lock", "w")  # noqa: SIM115 - held for the whole block
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"scratch directory {path} is in use by another replica") from None
        work = path / "dataflows"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        yield work
    finally:
        lock.close()


async def serve_compute_replica(
    *,
    listen: tuple[str, int],
    secret: Secret | bytes | None,
    scratch: Path,
    spark: Callable[[], SparkSession],
    location: PersistLocation | None,
    name: str = "replica",
    ids: IdGen | None = None,
    renderer: Renderer | None = None,
    stop: asyncio.Event | None = None,
    on_listening: Callable[[str, int], None] | None = None,
    grace_s: float | None = None,
    tls: ssl.SSLContext | None = None,
) -> int:
    """Run a compute replica until ``stop`` is set or it halts; return the exit code."""
    ids = ids or SystemIdGen()
    persist = None
    if location is not None:
        from spate.clock import SystemClock

        persist = PersistClient(location, clock=SystemClock(), ids=ids)
    done = stop or asyncio.Event()
    exit_code = 0

    def on_halt(reason: str) -> None:
        nonlocal exit_code
        exit_code = HALT_EXIT_CODE
        done.set()

    metrics = ReplicaMetrics(name)

    def runtime(post: Callable[[Event], None]) -> ComputeRuntime:
        return ComputeRuntime(
            post=post,
            spark=spark,
            persist=persist,
            scratch=scratch,
            ids=ids,
            metrics=metrics,
            renderer=renderer,
            name=name,
        )

    replica = ComputeReplica(
        state=ReplicaState(name=name), runtime_factory=runtime, metrics=metrics, on_halt=on_halt
    )
    await replica.start()
    host, port = listen
    handler: Handler = replica.handle
    watch: asyncio.Task[None] | None = None
    if grace_s is not None:
        idle = IdleExit(grace_s, done, name=f"compute replica {name}")
        handler = idle.wrap(handler)
        watch = asyncio.create_task(idle.run(), name="idle-exit")
    server = await serve(host, port, role="compute", handler=handler, secret=secret, tls=tls)
    if on_listening is not None:
        on_listening(server.host, server.port)
    try:
        await done.wait()
    finally:
        if watch is not None:
            watch.cancel()
        await server.close()
        await replica.close()
        if persist is not None:
            persist.close()
    return exit_code


def run(
    *,
    listen: str,
    secret_file: Path | None,
    scratch_dir: Path,
    spark_master: str,
    driver_memory: str,
    persist_blob: str | None,
    persist_consensus: str | None,
    replica_id: str | None,
    metrics_port: int | None,
    spark_conf: dict[str, str] | None = None,
    grace_s: float | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """The blocking entry of ``spate replica --role compute`` (exits with the exit code)."""
    logging.basicConfig(
        level=os.environ.get("SPATE_LOG_LEVEL", "INFO"),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    if (persist_blob is None) != (persist_consensus is None):
        raise SystemExit("--persist-blob and --persist-consensus go together")
    location = (
        PersistLocation.parse(persist_blob, persist_consensus)
        if persist_blob is not None and persist_consensus is not None
        else None
    )
    secret = read_secret_file(secret_file) if secret_file is not None else None
    name = replica_id or f"pid{os.getpid()}"
    if metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr="127.0.0.1")

    def spark() -> SparkSession:
        from spate.render.spark import create_session, exit_when_jvm_dies

        session = create_session(
            spark_master,
            app_name=f"spate-compute-{name}",
            driver_memory=driver_memory,
            extra=spark_conf,
        )
        exit_when_jvm_dies(session, f"compute replica {name}", JVM_EXIT_CODE)
        return session

    def listening(host: str, port: int) -> None:
        print(f"{READY_LINE} {host}:{port}", flush=True)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        with owned_scratch_dir(scratch_dir) as work:
            return await serve_compute_replica(
                listen=parse_listen(listen),
                secret=secret,
                scratch=work,
                spark=spark,
                location=location,
                name=name,
                stop=stop,
                on_listening=listening,
                grace_s=grace_s,
                tls=tls,
            )

    code = asyncio.run(main())
    logging.shutdown()
    # A halted replica must not linger (Spark's JVM and its threads): exit hard.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
