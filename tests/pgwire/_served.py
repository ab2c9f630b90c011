"""A pgwire server over a real environment, for the tests of reads answered on the loop."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread


@contextlib.contextmanager
def environment_served(data: Path, *, cluster: bool) -> Iterator[tuple[Environment, int, str]]:
    """A pgwire server over a new environment at ``data``, without clusters (reads are
    evaluated here) or with a cluster ``c`` of one replica the sessions run on: the
    environment, the server's port and a psycopg DSN."""
    env = Environment.open(data)
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    dsn = f"host=127.0.0.1 port={server.port} user=t dbname=spate sslmode=disable"
    if cluster:
        env.create_cluster("c", replicas=1)
        dsn += " options='-c cluster=c'"
    try:
        yield env, server.port, dsn
    finally:
        server.close()
        env.close()
