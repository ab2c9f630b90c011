"""A MariaDB server of the tests' own, with the row-based binlog on (skipped, saying why, where
MariaDB is not installed).

The machine's shared MariaDB (if any) is never touched: each session starts a server in a
temporary directory on a free port, as ``root`` without a password, and kills it at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_INSTALL = ("mariadb-install-db", "mysql_install_db")
_SERVER = ("/usr/sbin/mariadbd", "/usr/sbin/mysqld", "mariadbd")


@dataclass(frozen=True, slots=True)
class MariaDB:
    host: str
    port: int
    user: str
    datadir: Path
    process: subprocess.Popen[bytes]

    def connect(self, database: str | None = None, **kwargs: object) -> object:
        import pymysql

        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            database=database,
            autocommit=True,
            **kwargs,  # type: ignore[arg-type]
        )


def _find(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name) or (name if os.path.isfile(name) else None)
        if found:
            return found
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mariadb(tmp: Path) -> MariaDB:
    """Initialise a data directory under ``tmp`` and start a server on it (binlog ROW, GTIDs)."""
    install, server = _find(_INSTALL), _find(_SERVER)
    if install is None or server is None:
        pytest.skip("MariaDB is not installed (apt-get install mariadb-server)")
    datadir = tmp / "data"
    user = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run(
        [
            install,
            "--no-defaults",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            *user,
        ],
        check=True,
        capture_output=True,
    )
    port = _free_port()
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 (the server's lifetime)
    proc = subprocess.Popen(
        [
            server,
            "--no-defaults",
            f"--datadir={datadir}",
            f"--socket={tmp}/s",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--log-bin={tmp}/bin",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--server-id=1",
            f"--pid-file={tmp}/pid",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=32M",
            "--innodb-log-file-size=16M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            *user,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    db = MariaDB("127.0.0.1", port, "root", datadir, proc)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"MariaDB exited ({proc.returncode}): {(tmp / 'server.log').read_text()[-2000:]}"
            )
        try:
            conn = db.connect()
            conn.close()  # type: ignore[attr-defined]
            return db
        except Exception:
            if time.monotonic() > deadline:
                stop_mariadb(db)
                raise
            time.sleep(0.2)


def stop_mariadb(db: MariaDB) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(db.process.pid, signal.SIGKILL)
    db.process.wait()


def running_mariadb() -> Iterator[MariaDB]:
    """A started server for the length of a fixture (``yield from`` it); killed after."""
    tmp = Path(tempfile.mkdtemp(prefix="spate-mariadb-"))
    try:
        db = start_mariadb(tmp)
        try:
            yield db
        finally:
            stop_mariadb(db)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
