"""A :class:`~spate.persist.location.Blob` in a local directory.

``set(key, value)`` writes a temporary file in the key's directory, ``fsync``\\ s it,
``os.replace``\\ s it onto the final name and ``fsync``\\ s the directory, so a key is either
absent or complete — never half written — even if the process is killed at any point.
Temporary files start with ``.`` (never a valid key) and :meth:`FileBlob.sweep_temp` deletes the
ones a killed process left behind.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from spate.errors import Determinate, Indeterminate
from spate.persist.blob import check_blob_key

_TMP_PREFIX: Final = ".tmp-"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileBlob:
    """Blob keys as files under ``root`` (``a/b`` is ``root/a/b``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self._dirs: set[Path] = set()
        """Directories known to exist, made durable by whoever created them."""
        try:
            if not self.root.is_dir():
                self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
                _fsync_dir(self.root.parent)
        except OSError as e:
            raise Determinate(f"file blob: cannot create {self.root}: {e}") from e

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*check_blob_key(key).split("/"))

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            return None
        except OSError as e:
            raise Determinate(f"file blob: cannot read {key}: {e}") from e

    def _make_dir(self, parent: Path, key: str) -> None:
        """``parent`` exists, and so durably if this call created it (up to the root)."""
        try:
            if not parent.is_dir():
                parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                # Make the new directories durable up to the root.
                d = parent
                while d != self.root:
                    _fsync_dir(d.parent)
                    d = d.parent
        except OSError as e:
            raise Determinate(f"file blob: cannot create directory for {key}: {e}") from e
        self._dirs.add(parent)

    def _create(self, tmp: Path, key: str) -> int:
        """A new temporary file in a directory of :meth:`_make_dir`; one that went missing
        since (deleted by hand) is made again."""
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileNotFoundError:
            self._dirs.discard(tmp.parent)
            self._make_dir(tmp.parent, key)
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        parent = path.parent
        if parent not in self._dirs:  # checked once per directory, not once per write
            self._make_dir(parent, key)
        tmp = parent / f"{_TMP_PREFIX}{path.name}.{os.getpid()}.{time.monotonic_ns()}"
        try:
            fd = self._create(tmp, key)
            try:
                view = memoryview(value)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise Determinate(f"file blob: cannot write {key}: {e}") from e
        try:
            os.replace(tmp, path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise Determinate(f"file blob: cannot rename into {key}: {e}") from e
        try:
            _fsync_dir(parent)
        except OSError as e:
            raise Indeterminate(f"file blob: {key} written but not made durable: {e}") from e

    def delete(self, key: str) -> int | None:
        path = self._path(key)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise Indeterminate(f"file blob: cannot delete {key}: {e}") from e
        return size

    def list_keys(self, prefix: str) -> Iterator[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        # Walk only the directory the prefix points into.
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root.joinpath(*head.split("/")) if head else self.root
        if not start.is_dir():
            return iter(())
        try:
            for dirpath, dirnames, filenames in os.walk(start):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                rel_dir = os.path.relpath(dirpath, self.root)
                for name in filenames:
                    if name.startswith("."):
                        continue
                    rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
                    if not rel.startswith(prefix):
                        continue
                    try:
                        size = os.stat(os.path.join(dirpath, name)).st_size
                    except FileNotFoundError:
                        continue
                    found.append((rel, size))
        except OSError as e:
            raise Determinate(f"file blob: cannot list {prefix!r}: {e}") from e
        return iter(sorted(found))

    def local_path(self, key: str) -> str | None:
        return str(self._path(key))

    def sweep_temp(
        self, older_than_seconds: float, *, prefix: str = "", now: float | None = None
    ) -> int:
        """Delete temporary files older than ``older_than_seconds`` in the directory of
        ``prefix`` (and below); return how many."""
        cutoff = (time.time() if now is None else now) - older_than_seconds
        removed = 0
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root.joinpath(*head.split("/")) if head else self.root
        for dirpath, _dirnames, filenames in os.walk(start):
            for name in filenames:
                if not name.startswith(_TMP_PREFIX):
                    continue
                p = os.path.join(dirpath, name)
                try:
                    if os.stat(p).st_mtime < cutoff:
                        os.unlink(p)
                        removed += 1
                except OSError as e:
                    if e.errno != errno.ENOENT:
                        raise
        return removed

    def close(self) -> None:
        pass
