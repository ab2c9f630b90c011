"""``spate sql`` on a data directory that ``spate serve`` serves connects to that server (a
second open of the environment would fence the server out): real processes, a real terminal.

The statements here run in the server's process (no cluster, no replica), so the module takes
seconds beyond the two processes' start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spate.cli.served import FILE, Served, announce, find, read
from tests.cli.test_shell_pty import PROMPT, Terminal


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Served]]:
    data_dir = tmp_path_factory.mktemp("served") / "env"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spate", "serve", str(data_dir), "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while (found := find(data_dir)) is None:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the server did not announce itself"
            time.sleep(0.2)
        yield data_dir, found
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)  # (after the canceled statement: see the test)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert not (data_dir / FILE).exists(), "the server removed its file as it stopped"


def _sql(data_dir: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spate", "sql", str(data_dir), "-c", command],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_shell_runs_its_statements_on_the_server(served: tuple[Path, Served]) -> None:
    data_dir, server = served
    assert server.pid != os.getpid() and server.host == "127.0.0.1" and not server.password
    assert (data_dir / FILE).stat().st_mode & 0o777 == 0o600
    out = _sql(
        data_dir,
        "CREATE TABLE t (k int PRIMARY KEY, v text); "
        "INSERT INTO t VALUES (1, '[x]'), (2, NULL), (3, 'NULL'); "
        "SELECT k, v FROM t ORDER BY k; INSERT INTO t VALUES (1, 'again')",
    )
    assert out.returncode == 1, out.stderr  # the last statement failed
    assert "CREATE TABLE\nINSERT 0 3\n" in out.stdout
    assert "[x]" in out.stdout and "(3 rows)" in out.stdout
    assert out.stdout.count("NULL") == 1  # the text 'NULL'; NULL itself prints as nothing
    assert 'ERROR:  duplicate key value violates unique constraint "t_pkey"' in out.stdout
    assert "DETAIL:  Key (k)=(1) already exists." in out.stdout
    # the server still serves: the shell did not open (and fence) its environment
    conninfo = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (3,)


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_on_a_fresh_server_needs_no_setup(served: tuple[Path, Served]) -> None:
    """A new server answers a PostgreSQL script that starts with a primary key and groups
    (the default cluster is made when first needed), in one psql call."""
    _, server = served
    out = subprocess.run(
        [
            "psql",
            f"postgresql://psql@127.0.0.1:{server.port}/spate?sslmode=disable",
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "CREATE TABLE fresh (k int PRIMARY KEY, v text); "
            "INSERT INTO fresh VALUES (1, 'a'), (2, 'b'), (3, 'a'); "
            "SELECT v, count(*) FROM fresh GROUP BY v ORDER BY v",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-2:] == ["a|2", "b|1"], out.stdout


def test_the_shell_on_the_server_in_a_terminal(served: tuple[Path, Served], tmp_path: Path) -> None:
    data_dir, server = served
    term = Terminal(["-m", "spate", "sql", str(data_dir)], home=tmp_path)
    try:
        banner = " ".join(term.read_until(PROMPT).split())  # (wrapped at the terminal's width)
        assert f"the server of {data_dir} (port {server.port}," in banner
        term.run("CREATE TABLE u (a int NOT NULL, b text);")
        assert "INSERT 0 2" in term.run("INSERT INTO u VALUES (1, 'one'), (2, NULL);")
        out = term.run("\\d u")
        assert re.search(r"a\s*│\s*integer\s*│\s*not null", out), out
        assert re.search(r"public\s*│\s*u\s*│\s*table", term.run("\\dt")), "listed"
        # Ctrl-C sends the server a cancel request; the session goes on
        term.type(
            "SELECT count(*) FROM generate_series(1, 1000000) AS g(x) "
            "WHERE md5(md5(x::text)) < '1';"
        )
        term.read_until("< '1';\r\n")
        time.sleep(1.0)
        os.write(term.fd, b"\x03")
        out = term.read_until(PROMPT, timeout=60)
        assert "Cancel request sent" in out
        assert "canceling statement due to user request" in out
        assert "(2 rows)" in term.run("SELECT * FROM u;")
        assert term.close() == 0
    finally:
        try:
            os.kill(term.pid, signal.SIGKILL)
            os.waitpid(term.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def test_a_file_left_by_a_dead_server_is_ignored(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / FILE).write_text(
        json.dumps({"pid": dead.pid, "host": "127.0.0.1", "port": 1, "password": False})
    )
    assert read(tmp_path) is not None and find(tmp_path) is None
    # a live process that does not listen there: ignored too
    (tmp_path / FILE).write_text(
        json.dumps({"pid": os.getpid(), "host": "127.0.0.1", "port": 1, "password": False})
    )
    assert find(tmp_path) is None
    for junk in ("{", "[]", '{"pid": "1", "host": "h", "port": 1, "password": false}'):
        (tmp_path / FILE).write_text(junk)
        assert read(tmp_path) is None, junk


def test_announce_removes_only_its_own_file(tmp_path: Path) -> None:
    mine = Served(os.getpid(), "127.0.0.1", 5, False)
    with announce(tmp_path, mine):
        assert read(tmp_path) == mine
    assert not (tmp_path / FILE).exists()
    other = Served(os.getpid() + 1, "127.0.0.1", 6, True)
    with announce(tmp_path, mine):  # another server takes the directory over meanwhile
        doc = {"pid": other.pid, "host": other.host, "port": other.port, "password": True}
        (tmp_path / FILE).write_text(json.dumps(doc))
    assert read(tmp_path) == other, "the other server's file stays"
