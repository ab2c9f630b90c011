"""Every Blob and Consensus implementation, as fixtures for the shared conformance suites."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.persist.blob_file import FileBlob
from spate.persist.blob_mem import MemBlob
from spate.persist.consensus_mem import MemConsensus
from spate.persist.consensus_sqlite import SqliteConsensus
from spate.persist.location import Blob, Consensus
from tests.persist.conftest import make_s3_blob, moto_endpoint

__all__ = ["moto_endpoint"]


@pytest.fixture(params=["mem", "file", "s3"])
def blob(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Blob]:
    kind = request.param
    b: Blob
    if kind == "mem":
        b = MemBlob()
    elif kind == "file":
        b = FileBlob(tmp_path / "blob")
    else:
        b = make_s3_blob(request.getfixturevalue("moto_endpoint"))
    yield b
    b.close()


def make_postgres_consensus(url: str) -> Consensus:
    from spate.persist.consensus_postgres import PostgresConsensus

    table = f"consensus_test_{uuid.uuid4().hex[:12]}"
    return PostgresConsensus(url, table=table, schema="spate_persist_tests")


@pytest.fixture(params=["mem", "sqlite", "postgres"])
def consensus(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Consensus]:
    kind = request.param
    c: Consensus
    if kind == "mem":
        c = MemConsensus()
    elif kind == "sqlite":
        c = SqliteConsensus(tmp_path / "consensus.db")
    else:
        c = make_postgres_consensus(request.getfixturevalue("postgres_url"))
    yield c
    if kind == "postgres":
        c.drop_table()  # type: ignore[attr-defined]
    c.close()
