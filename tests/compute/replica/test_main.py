"""The process entry's helpers: secret files, --listen, the owned scratch directory."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from spate.compute.replica.main import owned_scratch_dir, parse_listen, read_secret_file
from spate.orchestrator.process import write_secret
from spate.protocol.secret import Secret, secret_bytes


def test_the_secret_is_the_file_text_like_every_other_component(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    write_secret(path)
    assert read_secret_file(path) == Secret.from_file(path)
    assert secret_bytes(read_secret_file(path)) == path.read_text().strip().encode()
    other = tmp_path / "other"
    text = secrets.token_urlsafe(32)
    other.write_text(text + "\n")
    assert read_secret_file(other).reveal() == text
    assert text not in repr(read_secret_file(other))


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:7000") == ("::1", 7000)
    for bad in ("127.0.0.1", ":80", "host:port"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_listen(bad)


def test_scratch_dir_is_owned_and_emptied(tmp_path: Path) -> None:
    stale = tmp_path / "dataflows" / "df1"
    stale.mkdir(parents=True)
    (stale / "b.parquet").write_bytes(b"old")
    with owned_scratch_dir(tmp_path) as work:
        assert work == tmp_path / "dataflows" and list(work.iterdir()) == []
        with (
            pytest.raises(SystemExit, match="in use by another replica"),
            owned_scratch_dir(tmp_path),
        ):
            pass
    with owned_scratch_dir(tmp_path):
        pass


def test_the_replica_exits_when_its_jvm_dies() -> None:
    """A replica whose Spark JVM was killed could only fail every step (and every read of its
    views) until restarted: the watch calls its exit as soon as the process is gone."""
    import signal
    import subprocess
    import threading

    from spate.render.spark import exit_with

    proc = subprocess.Popen(["sleep", "60"])
    exited: list[int] = []
    done = threading.Event()
    watch = exit_with(proc, "a JVM", lambda code: (exited.append(code), done.set()), poll_s=0.05)
    assert not done.wait(0.3) and exited == []  # alive: nothing happens
    proc.send_signal(signal.SIGKILL)
    assert done.wait(10)
    assert exited == [-signal.SIGKILL]
    watch.join(5)
