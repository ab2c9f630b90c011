"""Fixtures for persist tests: clients on real file blobs + SQLite, or on memory stores."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from spate.clock import ManualClock
from spate.frontier.antichain import Antichain
from spate.ids import SeededIdGen, ShardId
from spate.persist.client import PersistClient
from spate.persist.config import PersistConfig
from spate.persist.location import Blob, PersistLocation
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table
from spate.repr.types import Row

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


def updates(rows: Sequence[tuple[Row, int, int]], desc: RelationDesc = DESC) -> pa.Table:
    return updates_to_table(desc, rows)


def tok(i: int | None = None) -> uuid.UUID:
    return uuid.uuid4() if i is None else uuid.UUID(int=i)


A = Antichain.of
EMPTY = Antichain.empty()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


@pytest.fixture
def client(tmp_path: Path, clock: ManualClock) -> Iterator[PersistClient]:
    """A client on the embedded location (file blob + SQLite) under ``tmp_path``."""
    c = PersistClient(
        PersistLocation.embedded(tmp_path / "data"),
        clock=clock,
        ids=SeededIdGen(11),
        config=PersistConfig(poll_interval_s=0.002, poll_max_s=0.02),
    )
    yield c
    c.close()


@pytest.fixture
def shard() -> ShardId:
    return ShardId(uuid.uuid4())


_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 (an ephemeral port) for the whole session."""
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(_AWS_ENV)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make_s3_blob(endpoint: str, prefix: str = "spate") -> Blob:
    import boto3

    from spate.persist.blob_s3 import S3Blob

    bucket = f"spate-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return S3Blob(bucket=bucket, prefix=prefix, endpoint_url=endpoint, region="us-east-1")
