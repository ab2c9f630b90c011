"""The data directory of an environment.

::

    <data_dir>/                  mode 0700; every file in it is 0600
    <data_dir>/blob/             persist blobs (Parquet batches), unless settings name a store
    <data_dir>/consensus.db      persist consensus, catalog, timestamp oracle, epochs (SQLite),
                                 unless settings name a consensus store
    <data_dir>/secret            the replicas' shared transport secret (mode 0600)
    <data_dir>/secrets/<id>      connections' secrets, out of consensus (mode 0600; dir 0700),
                                 unless settings name another directory
    <data_dir>/services/<name>/  one directory per replica service (ports, pid, log, scratch)
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from spate.persist.location import PersistLocation
from spate.protocol.secret import Secret
from spate.storage.secrets import SecretsDir


@dataclass(frozen=True, slots=True)
class Layout:
    data_dir: Path
    persist: PersistLocation | None = None
    """Where persist keeps the data (``None``: embedded under ``data_dir``)."""
    secrets_path: Path | None = None
    """The connections' secrets directory (``None``: ``<data_dir>/secrets``)."""

    @property
    def secret_file(self) -> Path:
        return self.data_dir / "secret"

    @property
    def secrets_dir(self) -> Path:
        return self.secrets_path or self.data_dir / "secrets"

    def secrets(self) -> SecretsDir:
        return SecretsDir(self.secrets_dir)

    def location(self) -> PersistLocation:
        return self.persist or PersistLocation.embedded(self.data_dir)

    def ensure(self) -> None:
        """Create the directory (private to its owner: mode 0700, tightened if it exists) and
        the secret (once; never overwritten)."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.data_dir.stat().st_uid == os.getuid():
            self.data_dir.chmod(0o700)
        if not self.secret_file.exists():
            fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32))

    def secret(self) -> Secret:
        """The transport secret, as replicas read it from ``--secret-file``."""
        return Secret.from_file(self.secret_file)
