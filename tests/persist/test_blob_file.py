"""FileBlob's write path: a process killed between writing and renaming leaves no key."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from spate.persist.blob_file import FileBlob
from spate.testing.process import spate_env


def test_kill_between_write_and_rename_leaves_no_half_written_key(tmp_path: Path) -> None:
    root = tmp_path / "blob"
    child = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from spate.persist.blob_file import FileBlob
        blob = FileBlob(Path({str(root)!r}))
        blob.set("s/complete.parquet", b"x" * 1000)
        def die(src, dst):
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace = die
        blob.set("s/half.parquet", b"y" * 100_000)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], env=spate_env(), capture_output=True, timeout=60
    )
    assert proc.returncode == -9, proc.stderr.decode()
    blob = FileBlob(root)
    assert blob.get("s/half.parquet") is None
    assert blob.get("s/complete.parquet") == b"x" * 1000
    assert [k for k, _ in blob.list_keys("s/")] == ["s/complete.parquet"]
    temps = [p for p in (root / "s").iterdir() if p.name.startswith(".tmp-")]
    assert len(temps) == 1 and temps[0].stat().st_size == 100_000
    assert blob.sweep_temp(3600) == 0
    assert blob.sweep_temp(0, prefix="other/", now=temps[0].stat().st_mtime + 1) == 0
    assert blob.sweep_temp(0, prefix="s/", now=temps[0].stat().st_mtime + 1) == 1
    assert not temps[0].exists()


def test_a_key_directory_removed_after_a_write_is_made_again(tmp_path: Path) -> None:
    blob = FileBlob(tmp_path / "blob")
    blob.set("s/a.parquet", b"a")
    (tmp_path / "blob" / "s" / "a.parquet").unlink()
    (tmp_path / "blob" / "s").rmdir()
    blob.set("s/b.parquet", b"b")  # the directory is known to this blob, yet gone
    assert blob.get("s/b.parquet") == b"b"
    assert [k for k, _ in blob.list_keys("s/")] == ["s/b.parquet"]
