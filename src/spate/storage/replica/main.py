"""The storage replica process: ``spate replica --role storage``.

Opens persist at the given location, serves the storage protocol on ``host:port`` (loopback
by default; a non-loopback bind needs a secret) and runs until SIGTERM/SIGINT. It prints one
line ``spate storage replica listening on HOST:PORT`` once it accepts connections (useful with
port 0). It starts no JVM unless a file source needs Spark. With ``--grace-period`` it exits
once no controller has held it for that many seconds (:mod:`spate.protocol.idle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spate.clock import SystemClock
from spate.ids import ReplicaId, SystemIdGen
from spate.persist.client import PersistClient
from spate.persist.location import PersistLocation
from spate.protocol.idle import Handler, IdleExit
from spate.protocol.secret import Secret
from spate.protocol.transport import serve
from spate.storage.replica.server import ReplicaContext, StorageReplica
from spate.storage.secrets import SecretsDir
from spate.storage.sources.stash import BlobStash

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log: Final = logging.getLogger("spate.storage.replica")


def spark_factory(master: str) -> SparkSession:
    from spate.render.spark import create_session, exit_when_jvm_dies

    session = create_session(master, app_name="spate-storage-replica")
    exit_when_jvm_dies(session, "storage replica", JVM_EXIT_CODE)
    return session


JVM_EXIT_CODE: Final = 4
"""The exit code of a storage replica whose Spark JVM died (it is restarted)."""


async def serve_storage_replica(
    *,
    host: str,
    port: int,
    location: PersistLocation,
    secret: Secret | None,
    replica_id: ReplicaId | None = None,
    spark_master: str = "local[1]",
    stop: asyncio.Event | None = None,
    secrets: SecretsDir | None = None,
    grace_s: float | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Run a storage replica until ``stop`` is set, or no controller has held it for
    ``grace_s`` seconds (or forever)."""
    client = PersistClient(location, clock=SystemClock(), ids=SystemIdGen())
    ctx = ReplicaContext(
        persist=client,
        stash=BlobStash(client.blob),
        clock=SystemClock(),
        ids=SystemIdGen(),
        replica_id=replica_id,
        spark=lambda: spark_factory(spark_master),
        secrets=secrets,
    )
    replica = StorageReplica(ctx)
    done = stop or asyncio.Event()
    handler: Handler = replica.handle
    watch: asyncio.Task[None] | None = None
    if grace_s is not None:
        idle = IdleExit(grace_s, done, name="storage replica")
        handler = idle.wrap(handler)
        watch = asyncio.create_task(idle.run(), name="idle-exit")
    server = await serve(host, port, role="storage", handler=handler, secret=secret, tls=tls)
    print(f"spate storage replica listening on {server.host}:{server.port}", flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, done.set)
    try:
        await done.wait()
    finally:
        if watch is not None:
            watch.cancel()
        await server.close()
        await replica.close()
        client.close()


def run(
    *,
    host: str,
    port: int,
    blob_uri: str,
    consensus_uri: str,
    secret_file: Path | None,
    replica_id: str | None,
    spark_master: str,
    secrets_dir: Path | None = None,
    grace_s: float | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """The blocking entry of the ``replica --role storage`` command."""
    logging.basicConfig(
        level=os.environ.get("SPATE_LOG_LEVEL", "INFO"),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    secret = Secret.from_file(secret_file) if secret_file is not None else None
    asyncio.run(
        serve_storage_replica(
            host=host,
            port=port,
            location=PersistLocation.parse(blob_uri, consensus_uri),
            secret=secret,
            replica_id=ReplicaId.parse(replica_id) if replica_id else None,
            spark_master=spark_master,
            secrets=SecretsDir(secrets_dir) if secrets_dir is not None else None,
            grace_s=grace_s,
            tls=tls,
        )
    )
