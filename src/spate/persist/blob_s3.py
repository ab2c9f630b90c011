"""A :class:`~spate.persist.location.Blob` in an S3-compatible object store (boto3).

Keys live under ``prefix/`` in ``bucket``. ``put_object`` is atomic, so ``set`` needs no temporary
object. Credentials come from the standard AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, profiles…), never from the location URI. Spark in spate cannot read
S3 (no hadoop-aws), so :meth:`local_path` is ``None`` and readers stage batches to local files.

An error answered by the server, or a failure to connect, is :class:`~spate.errors.Determinate`;
a timeout or a connection lost after a write was sent is :class:`~spate.errors.Indeterminate`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spate.errors import Determinate, Indeterminate
from spate.persist.blob import check_blob_key


class S3Blob:
    """Blob keys as objects ``prefix/key`` in ``bucket``."""

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 60.0,
    ) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        config = Config(
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            retries={"mode": "standard", "max_attempts": 3},
        )
        self._s3: Any = boto3.client(
            "s3", endpoint_url=endpoint_url, region_name=region, config=config
        )

    def _name(self, key: str) -> str:
        check_blob_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _error(self, what: str, e: Exception, *, write: bool) -> Exception:
        from botocore import exceptions as bx

        indeterminate = (bx.ReadTimeoutError, bx.ConnectionClosedError)
        if write and isinstance(e, indeterminate):
            return Indeterminate(f"s3 blob: {what} may have happened: {type(e).__name__}")
        return Determinate(f"s3 blob: {what} failed: {type(e).__name__}: {e}")

    def get(self, key: str) -> bytes | None:
        from botocore import exceptions as bx

        name = self._name(key)
        try:
            resp = self._s3.get_object(Bucket=self.bucket, Key=name)
            body: bytes = resp["Body"].read()
            return body
        except bx.ClientError as e:
            if _code(e) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._error(f"get({key})", e, write=False) from e
        except (bx.BotoCoreError, OSError) as e:
            raise self._error(f"get({key})", e, write=False) from e

    def set(self, key: str, value: bytes) -> None:
        from botocore import exceptions as bx

        name = self._name(key)
        try:
            self._s3.put_object(Bucket=self.bucket, Key=name, Body=bytes(value))
        except (bx.ClientError, bx.BotoCoreError, OSError) as e:
            raise self._error(f"set({key})", e, write=True) from e

    def delete(self, key: str) -> int | None:
        from botocore import exceptions as bx

        name = self._name(key)
        try:
            try:
                size = int(self._s3.head_object(Bucket=self.bucket, Key=name)["ContentLength"])
            except bx.ClientError as e:
                if _code(e) in ("NoSuchKey", "404", "NotFound"):
                    return None
                raise
            self._s3.delete_object(Bucket=self.bucket, Key=name)
            return size
        except (bx.ClientError, bx.BotoCoreError, OSError) as e:
            raise self._error(f"delete({key})", e, write=True) from e

    def list_keys(self, prefix: str) -> Iterator[tuple[str, int]]:
        from botocore import exceptions as bx

        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        strip = len(self.prefix) + 1 if self.prefix else 0
        out: list[tuple[str, int]] = []
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    out.append((obj["Key"][strip:], int(obj["Size"])))
        except (bx.ClientError, bx.BotoCoreError, OSError) as e:
            raise self._error(f"list({prefix!r})", e, write=False) from e
        return iter(sorted(out))

    def local_path(self, key: str) -> str | None:
        return None

    def close(self) -> None:
        self._s3.close()


def _code(e: Any) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))
