"""A PostgreSQL wire protocol (v3) server over spate: psql, psycopg, SQLAlchemy, asyncpg…"""

from __future__ import annotations

from spate.pgwire.engine import Context, Described, Engine, Relation, Result, Rows, Stream
from spate.pgwire.server import Server, ServerConfig, ServerThread

__all__ = [
    "Context",
    "Described",
    "Engine",
    "Relation",
    "Result",
    "Rows",
    "Server",
    "ServerConfig",
    "ServerThread",
    "Stream",
]
