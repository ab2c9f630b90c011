"""``spate sql`` in a real terminal (a pty): what a user types and sees, Ctrl-C included.

One shell on an environment with no cluster: every statement runs in-process (no replica,
no JVM), so the session takes seconds.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PROMPT = "spate=> "
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A process on a pty: type lines, read what it prints up to the next prompt."""

    def __init__(self, argv: list[str], home: Path, *, sigint_ignored: bool = False) -> None:
        env = {**os.environ, "HOME": str(home)}  # its history file is the test's
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its controlling terminal
            if sigint_ignored:  # as a background job of a non-interactive shell starts
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.execve(sys.executable, [sys.executable, *argv], env)
        self.pid, self.fd = pid, fd

    def read_until(self, text: str, timeout: float = 120.0) -> str:
        out = b""
        deadline = time.monotonic() + timeout
        while text.encode() not in out:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no {text!r} in {out.decode(errors='replace')!r}")
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # the process ended
                break
            if not chunk:
                break
            out += chunk
        return _ANSI.sub("", out.decode(errors="replace")).replace("\r\n", "\n")

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def run(self, line: str) -> str:
        """Type ``line`` and what it prints up to the next prompt (its echo removed)."""
        self.type(line)
        return self.read_until(PROMPT).split("\n", 1)[-1].removesuffix(PROMPT)

    def close(self) -> int:
        self.type("\\q")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            if select.select([self.fd], [], [], 0.2)[0]:
                with contextlib.suppress(OSError):
                    os.read(self.fd, 4096)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise TimeoutError("the shell did not quit")


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(["-m", "spate", "sql", str(tmp_path / "env")], home=tmp_path)
    try:
        term.read_until(PROMPT)
        yield term
    finally:
        try:  # a shell the test did not quit
            os.kill(term.pid, signal.SIGKILL)
            os.waitpid(term.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def test_shell_in_a_terminal(shell: Terminal, tmp_path: Path) -> None:
    # values print as they are, never read as markup; NULL differs from the text 'NULL'
    out = shell.run("SELECT '[x]' AS a, '[/oops]' AS b, NULL AS c, 'NULL' AS d;")
    assert "[x]" in out and "[/oops]" in out and "(1 row)" in out and "ERROR" not in out
    assert "NULL" in out
    shell.run("\\pset null '(null)'")
    assert "(null)" in shell.run("SELECT NULL AS c;")

    # DML answers its command tag; \timing prints each statement's time
    assert "CREATE TABLE" in shell.run("CREATE TABLE t (a int NOT NULL, upper bigint);")
    assert "Timing is on." in shell.run("\\timing")
    out = shell.run("INSERT INTO t VALUES (1, 2), (3, 4), (5, 6);")
    assert "INSERT 0 3" in out and re.search(r"Time: \d+\.\d{3} ms", out)
    assert "Timing is off." in shell.run("\\timing off")
    assert "UPDATE 2" in shell.run("UPDATE t SET a = 0 WHERE a > 1;")
    assert "DELETE 1" in shell.run("DELETE FROM t WHERE a = 1;")
    out = shell.run("SELECT upper FROM t ORDER BY upper;")
    assert "4" in out and "6" in out and "1970" not in out  # a user column, not a time

    # \d lists relations and describes one
    out = shell.run("\\d")
    assert re.search(r"public\s*│\s*t\s*│\s*table", out)
    out = shell.run("\\d t")
    assert re.search(r"a\s*│\s*integer\s*│\s*not null", out)
    assert "\\timing" in shell.run("\\?")

    # Ctrl-C cancels the running statement and the shell goes on
    # (seconds of per-row work in-process, in little memory)
    out = _cancel_a_long_statement(shell)
    assert "canceling statement due to user request" in out
    assert "(1 row)" in shell.run("SELECT 1 AS one;")

    assert shell.close() == 0
    assert not (tmp_path / "env" / "services").exists()  # no replica was started
    assert "INSERT INTO t VALUES" in (tmp_path / ".spate_sql_history").read_text()


def _cancel_a_long_statement(term: Terminal) -> str:
    """Ctrl-C while a statement runs for seconds in-process: what the shell prints."""
    term.type(
        "SELECT count(*) FROM generate_series(1, 1000000) AS g(x) WHERE md5(md5(x::text)) < '1';"
    )
    term.read_until("< '1';\r\n")  # the line was entered: the statement is running
    time.sleep(0.5)
    os.write(term.fd, b"\x03")
    return term.read_until(PROMPT, timeout=60)


def test_ctrl_c_cancels_even_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A shell started where SIGINT is ignored (a background job of a script, nohup-like
    launchers) still takes the terminal's Ctrl-C, as psql does."""
    term = Terminal(["-m", "spate", "sql", str(tmp_path / "env")], tmp_path, sigint_ignored=True)
    try:
        term.read_until(PROMPT)
        assert "canceling statement due to user request" in _cancel_a_long_statement(term)
        assert "(1 row)" in term.run("SELECT 1 AS one;")
        assert term.close() == 0
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(term.pid, signal.SIGKILL)
            os.waitpid(term.pid, 0)


def test_command_prints_each_statement_result(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "spate", "sql", str(tmp_path / "env"), "-c",
         "CREATE TABLE t (a int); INSERT INTO t VALUES (1), (NULL); SELECT a, '[x]' AS v FROM t"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "CREATE TABLE\nINSERT 0 2\n" in out.stdout
    assert "[x]" in out.stdout and "(2 rows)" in out.stdout and "NULL" not in out.stdout
