"""The psql binary against the server (errors, COPY). psql's and SQLAlchemy's catalog queries
are tested against a real environment in test_catalog_clients.py."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest

from spate.pgwire.server import ServerThread

PSQL = shutil.which("psql")
# psql writes COPY data through stdio: unbuffered, its first row arrives as soon as it is sent.
STDBUF = ["stdbuf", "-o0"] if shutil.which("stdbuf") else []
needs_psql = pytest.mark.skipif(PSQL is None, reason="the psql binary is not installed")


def psql(
    server: ServerThread, command: str, *, timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    assert PSQL is not None
    env = dict(os.environ, PGSSLMODE="disable", PGCONNECT_TIMEOUT="5")
    return subprocess.run(
        [PSQL, "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester", "-d", "spate",
         "-v", "VERBOSITY=verbose", "-c", command],
        capture_output=True, text=True, timeout=timeout, env=env, check=False,
    )  # fmt: skip


@needs_psql
def test_psql_query_and_error(server: ServerThread) -> None:
    out = psql(server, "SELECT * FROM t WHERE id = 5")
    assert out.returncode == 0, out.stderr
    assert (
        "  5 | name 5 |   7.5 |   5.07 | f    | 2020-01-06 | 2021-02-03 04:05:11.1234 |"
        in out.stdout
    )
    err = psql(server, "SELECT * FROM nope")
    assert err.returncode == 1 and 'ERROR:  42P01: relation "nope" does not exist' in err.stderr
    # An error that points into the statement: psql draws the caret from the position field.
    located = psql(server, "SELECT 1; SELECT prise FROM t")
    assert 'ERROR:  42703: column "prise" does not exist' in located.stderr, located.stderr
    caret = " " * len("LINE 1: SELECT 1; SELECT ") + "^"
    assert f"LINE 1: SELECT 1; SELECT prise FROM t\n{caret}\n" in located.stderr
    assert "HINT:  check the column name" in located.stderr


@needs_psql
def test_psql_copy_subscribe_streams_until_interrupted(server: ServerThread) -> None:
    assert PSQL is not None
    env = dict(os.environ, PGSSLMODE="disable")
    proc = subprocess.Popen(
        [*STDBUF, PSQL, "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester", "-d",
         "spate", "-c", "COPY (SUBSCRIBE t) TO STDOUT"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        started = time.monotonic()
        first = proc.stdout.readline()
        assert first == b"1000\t1\t0\n"
        assert time.monotonic() - started < 10
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)  # psql sends a CancelRequest
        proc.wait(timeout=10)
        assert proc.returncode in (0, 1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
