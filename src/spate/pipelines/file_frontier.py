"""The file inputs' frontier: which version of which file every input table holds, persisted.

A run compares each input directory with this record instead of reading the input table, so
finding what changed costs a directory listing, and only changed files are read. The record is
a JSON file in the environment's data directory (``spate-pipeline-inputs.json``), replaced
atomically (written aside, renamed into place) on every change.

Writing a file's rows and recording its version cannot be one atomic step (the rows go to a
spate table, the record to a file), so each change is recorded as **pending** first: ``begin``
(the old and new versions) → the table writes → ``commit``. A run that finds a pending file
(the previous one stopped in between) asks the table which version of that file it holds — a
read of that file's rows only when there was a crash — and resumes from there: no file is read
twice into the table or lost. An input table with no record (created before the record
existed) is recorded from the table itself, once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

__all__ = ["FileFrontier"]

FRONTIER_FILE: Final = "spate-pipeline-inputs.json"


class FileFrontier:
    """The persisted versions of every input table's files (module docs)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FRONTIER_FILE
        raw = json.loads(self.path.read_text()) if self.path.exists() else {}
        self._files: dict[str, dict[str, str]] = {t: dict(v["files"]) for t, v in raw.items()}
        self._pending: dict[str, dict[str, list[str | None]]] = {
            t: {f: list(p) for f, p in v.get("pending", {}).items()} for t, v in raw.items()
        }

    def known(self, table: str) -> bool:
        """Whether ``table`` has a record (else it must be recorded from the table once)."""
        return table in self._files

    def files(self, table: str) -> dict[str, str]:
        """The versions ``table`` holds, file name → version (a copy)."""
        return dict(self._files.get(table, {}))

    def pending(self, table: str) -> list[str]:
        """The files whose change was begun and not committed (a run stopped in between)."""
        return sorted(self._pending.get(table, {}))

    def reset(self, table: str, files: dict[str, str]) -> None:
        """Record that ``table`` holds exactly ``files`` (a new table: none)."""
        self._files[table] = dict(files)
        self._pending[table] = {}
        self._save()

    def resolve(self, table: str, name: str, held: str | None) -> None:
        """After a stop in between: ``table`` holds version ``held`` of ``name`` (or none)."""
        self._pending.get(table, {}).pop(name, None)
        self._set(table, name, held)
        self._save()

    def begin(self, table: str, name: str, old: str | None, new: str | None) -> None:
        self._pending.setdefault(table, {})[name] = [old, new]
        self._files.setdefault(table, {})
        self._save()

    def commit(self, table: str, name: str, new: str | None) -> None:
        self._pending.get(table, {}).pop(name, None)
        self._set(table, name, new)
        self._save()

    def _set(self, table: str, name: str, version: str | None) -> None:
        files = self._files.setdefault(table, {})
        if version is None:
            files.pop(name, None)
        else:
            files[name] = version

    def _save(self) -> None:
        doc = {
            t: {"files": self._files[t], "pending": self._pending.get(t, {})}
            for t in sorted(self._files)
        }
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
