"""Secrets kept out of durable descriptions: a directory of files, one per secret.

A connection given with a literal :class:`~spate.protocol.secret.Secret` (a PostgreSQL URL
with a password) is *externalized* when the environment creates the source or sink: the value
goes to ``<secrets dir>/<id>`` (mode 0600, written atomically) and every durable description,
the catalog and the storage controller's metadata in consensus, holds a
:class:`~spate.protocol.secret.SecretRef` instead. The storage replica *resolves* the reference
from the same directory (``--secrets-dir``) just before it opens the connection, so the value
travels only between that directory and the process using it.

Locally the environment and its replicas share the data directory; replicas on other hosts get
the directory mounted (as Kubernetes mounts secrets). The environment owns the directory's
secrets: a source or sink may also be created with a ``SecretRef`` to a file placed there, and
dropping the last source or sink that references a secret deletes it.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path
from typing import TypeVar

from spate.protocol.secret import Secret, SecretRef


class SecretMissing(LookupError):
    """A reference names no secret in the directory (names the id, never a value)."""


C = TypeVar("C")


class SecretsDir:
    """The secrets of one environment, one file each (see the module docs)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def ensure(self) -> None:
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _file(self, ref: SecretRef) -> Path:
        return self.path / ref.id

    def put(self, secret: Secret) -> SecretRef:
        """Store ``secret`` under a fresh id."""
        self.ensure()
        ref = SecretRef(f"s-{uuid.uuid4().hex}")
        tmp = self.path / f".{ref.id}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secret.reveal())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._file(ref))
        return ref

    def get(self, ref: SecretRef) -> Secret:
        try:
            return Secret(self._file(ref).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SecretMissing(f"secret {ref.id} is not in {self.path}") from None

    def delete(self, ref: SecretRef) -> None:
        self._file(ref).unlink(missing_ok=True)

    def externalize(self, connection: C) -> C:
        """``connection`` with its literal secret (if any) stored here and referenced."""
        value = getattr(connection, "connection", None)
        if not isinstance(value, Secret):
            return connection
        return dataclasses.replace(connection, connection=self.put(value))  # type: ignore[type-var]

    def resolve(self, connection: C) -> C:
        """``connection`` with its secret reference (if any) replaced by the value."""
        ref = referenced(connection)
        if ref is None:
            return connection
        return dataclasses.replace(connection, connection=self.get(ref))  # type: ignore[type-var]


def referenced(connection: object) -> SecretRef | None:
    """The secret reference ``connection`` holds, if any."""
    value = getattr(connection, "connection", None)
    return value if isinstance(value, SecretRef) else None


def resolve_with(secrets: SecretsDir | None, connection: C) -> C:
    """:meth:`SecretsDir.resolve`, or a clear error when a reference meets no directory."""
    ref = referenced(connection)
    if ref is None:
        return connection
    if secrets is None:
        raise SecretMissing(
            f"secret {ref.id}: this replica was started without --secrets-dir, so it cannot "
            "read the connection's secret"
        )
    return secrets.resolve(connection)
