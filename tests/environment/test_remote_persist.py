"""An environment whose persist lives on S3 (moto) and PostgreSQL, from the settings: nothing
but the secrets and service files lands in the data directory, and a reopen finds the data."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.config import Settings
from spate.environment.api import Environment
from spate.repr import INT64, TEXT, RelationDesc

pytestmark = [pytest.mark.postgres]

AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    for k, v in AWS.items():
        monkeypatch.setenv(k, v)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    import psycopg

    name = f"spate_rp_{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_tables_live_on_s3_and_postgres(
    tmp_path: Path, s3: str, schema: str, postgres_url: str
) -> None:
    import boto3

    boto3.client("s3", endpoint_url=s3, region_name="us-east-1").create_bucket(
        Bucket="spate-env-test"
    )
    data = tmp_path / "data"
    settings = Settings(
        data_dir=data,
        persist={
            "blob": f"s3://spate-env-test/env?endpoint={s3}&region=us-east-1",
            "consensus": f"{postgres_url}?schema={schema}",
        },
    )
    desc = RelationDesc.of(("id", INT64, False), ("name", TEXT))
    env = Environment.open(settings=settings)
    try:
        env.create_table("t", desc)
        env.insert("t", [(1, "a"), (2, None)])
        assert sorted(env.select("t").to_pylist(), key=lambda r: r["id"]) == [
            {"id": 1, "name": "a"},
            {"id": 2, "name": None},
        ]
    finally:
        env.close()
    assert not (data / "consensus.db").exists() and not (data / "blob").exists()
    keys = boto3.client("s3", endpoint_url=s3, region_name="us-east-1").list_objects_v2(
        Bucket="spate-env-test", Prefix="env/"
    )
    assert keys.get("KeyCount", 0) > 0
    env = Environment.open(data, settings=settings)
    try:
        assert env.names() == ["t"]
        assert env.select("t").num_rows == 2
    finally:
        env.close()
    assert (data / "secret").exists()  # the transport secret stays local
