"""The data directory of an environment, and how its replica services are started.

::

    <data_dir>/                  mode 0700; every file in it is 0600
    <data_dir>/blob/             persist blobs (Parquet batches)
    <data_dir>/consensus.db      persist consensus, catalog, timestamp oracle, epochs (SQLite)
    <data_dir>/secret            the replicas' shared transport secret (mode 0600)
    <data_dir>/secrets/<id>      connections' secrets, out of consensus (mode 0600; dir 0700)
    <data_dir>/services/<name>/  one directory per replica service (ports, pid, log, scratch)
"""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from spate.orchestrator.service import SERVICE_DIR_PLACEHOLDER, ServiceConfig
from spate.persist.location import PersistLocation
from spate.protocol.secret import Secret
from spate.storage.secrets import SecretsDir


@dataclass(frozen=True, slots=True)
class Layout:
    data_dir: Path

    @property
    def secret_file(self) -> Path:
        return self.data_dir / "secret"

    @property
    def secrets_dir(self) -> Path:
        return self.data_dir / "secrets"

    def secrets(self) -> SecretsDir:
        return SecretsDir(self.secrets_dir)

    def location(self) -> PersistLocation:
        return PersistLocation.embedded(self.data_dir)

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


def compute_replica_service(
    layout: Layout, replica: str, *, spark_master: str, driver_memory: str
) -> ServiceConfig:
    """``spate replica --role compute`` for one replica of a cluster."""
    loc = layout.location()
    return ServiceConfig(
        argv=(
            sys.executable,
            "-m",
            "spate",
            "replica",
            "--role",
            "compute",
            "--listen",
            "127.0.0.1:{port:listen}",
            "--secret-file",
            str(layout.secret_file),
            "--scratch-dir",
            f"{SERVICE_DIR_PLACEHOLDER}/scratch",
            "--blob-uri",
            loc.blob_uri,
            "--consensus-uri",
            loc.consensus_uri,
            "--replica-id",
            replica,
            "--spark-master",
            spark_master,
            "--driver-memory",
            driver_memory,
        ),
        env=_child_env(),
    )


def storage_replica_service(layout: Layout, replica: str) -> ServiceConfig:
    """``spate replica --role storage``: runs sources and sinks."""
    loc = layout.location()
    return ServiceConfig(
        argv=(
            sys.executable,
            "-m",
            "spate",
            "replica",
            "--role",
            "storage",
            "--listen",
            "127.0.0.1:{port:listen}",
            "--secret-file",
            str(layout.secret_file),
            "--secrets-dir",
            str(layout.secrets_dir),
            "--blob-uri",
            loc.blob_uri,
            "--consensus-uri",
            loc.consensus_uri,
            "--replica-id",
            replica,
        ),
        env=_child_env(),
    )


def _child_env() -> dict[str, str]:
    """Children import the same ``spate`` package as this process."""
    import spate

    src = str(Path(spate.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    parts = [src] + [p for p in path.split(os.pathsep) if p and p != src]
    return {"PYTHONPATH": os.pathsep.join(parts)}
