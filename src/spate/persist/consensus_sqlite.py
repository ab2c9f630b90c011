"""A :class:`~spate.persist.location.Consensus` in one SQLite file: the embedded default.

Safe across processes: WAL journal, ``synchronous=FULL`` (a commit is durable when it returns),
a busy timeout, and every ``compare_and_set`` is one conditional ``INSERT`` inside a
``BEGIN IMMEDIATE`` transaction (the write lock is taken before the condition is read, so two
processes can never both see the same head and both append). ``compare_and_set_many`` runs one
such ``INSERT`` per op inside one transaction: one commit, one fsync, for the batch.

Errors before the commit are :class:`~spate.errors.Determinate`; an error from ``COMMIT`` itself
is :class:`~spate.errors.Indeterminate`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from spate.errors import Determinate, Indeterminate
from spate.persist.consensus import (
    CasOp,
    VersionedData,
    check_cas_ops,
    check_consensus_key,
    next_seqno,
)
from spate.persist.crash import crash_point
from spate.persist.errors import TruncateBeyondHead

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS consensus ("
    " shard TEXT NOT NULL, seqno INTEGER NOT NULL, data BLOB NOT NULL,"
    " PRIMARY KEY (shard, seqno)) WITHOUT ROWID"
)
_CAS: Final = (
    "INSERT INTO consensus (shard, seqno, data) SELECT ?, ?, ?"
    " WHERE (SELECT max(seqno) FROM consensus WHERE shard = ?) IS ?"
)


class SqliteConsensus:
    """Consensus in the SQLite database at ``path`` (created if absent, unless ``read_only``)."""

    def __init__(
        self, path: Path, *, busy_timeout_ms: int = 60_000, read_only: bool = False
    ) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.commits = 0
        """Write transactions committed by ``compare_and_set``/``compare_and_set_many``."""
        try:
            if read_only:
                if not self.path.exists():
                    raise Determinate(f"sqlite consensus: no database at {self.path}")
                uri = f"file:{self.path}?mode=ro"
                self._conn = sqlite3.connect(
                    uri, uri=True, isolation_level=None, check_same_thread=False
                )
                self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                # Private to its owner; SQLite gives its WAL and shared-memory files the
                # database file's mode.
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
                self._conn = sqlite3.connect(
                    str(self.path), isolation_level=None, check_same_thread=False
                )
                self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
                self._conn.execute(_SCHEMA)
        except sqlite3.Error as e:
            raise Determinate(f"sqlite consensus: cannot open {self.path}: {e}") from e

    def head(self, key: str) -> VersionedData | None:
        check_consensus_key(key)
        with self._lock:
            try:
                row = self._conn.execute(
                    "SELECT seqno, data FROM consensus WHERE shard = ? ORDER BY seqno DESC LIMIT 1",
                    (key,),
                ).fetchone()
            except sqlite3.Error as e:
                raise Determinate(f"sqlite consensus: head({key}) failed: {e}") from e
        return None if row is None else VersionedData(int(row[0]), bytes(row[1]))

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        (ok,) = self.compare_and_set_many([CasOp(key, expected, data)])
        return ok

    def compare_and_set_many(self, ops: Sequence[CasOp]) -> list[bool]:
        ops = check_cas_ops(ops)
        if not ops:
            return []
        what = ops[0].key if len(ops) == 1 else f"{len(ops)} keys"
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise Determinate(f"sqlite consensus: cas({what}) could not begin: {e}") from e
            try:
                out = []
                for op in ops:
                    params = (op.key, next_seqno(op.expected), bytes(op.data), op.key, op.expected)
                    out.append(conn.execute(_CAS, params).rowcount == 1)
                    if len(out) == 1 < len(ops):
                        crash_point("consensus.mid_batch_cas")
            except sqlite3.Error as e:
                self._rollback()
                raise Determinate(f"sqlite consensus: cas({what}) failed: {e}") from e
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise Indeterminate(f"sqlite consensus: cas({what}) commit failed: {e}") from e
            self.commits += 1
            return out

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("ROLLBACK")

    def change_token(self) -> int:
        """A number that differs from the last call's once another connection (another process
        or client) committed anything: SQLite's ``PRAGMA data_version``, one read of the
        shared-memory index, no table access. This connection's own commits do not change it.
        A watcher reads it often and fetches state only when it moved."""
        with self._lock:
            try:
                row = self._conn.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error as e:
                raise Indeterminate(f"sqlite consensus: data_version: {e}") from e
        return int(row[0])

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        check_consensus_key(key)
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT seqno, data FROM consensus WHERE shard = ? AND seqno >= ?"
                    " ORDER BY seqno LIMIT ?",
                    (key, from_seqno, limit),
                ).fetchall()
            except sqlite3.Error as e:
                raise Determinate(f"sqlite consensus: scan({key}) failed: {e}") from e
        return [VersionedData(int(s), bytes(d)) for s, d in rows]

    def truncate(self, key: str, seqno: int) -> int:
        check_consensus_key(key)
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise Determinate(f"sqlite consensus: truncate({key}) could not begin: {e}") from e
            try:
                (head,) = conn.execute(
                    "SELECT max(seqno) FROM consensus WHERE shard = ?", (key,)
                ).fetchone()
                if head is None or seqno > head:
                    self._rollback()
                    raise TruncateBeyondHead(key, seqno, head)
                cur = conn.execute(
                    "DELETE FROM consensus WHERE shard = ? AND seqno < ?", (key, seqno)
                )
                deleted = cur.rowcount
            except sqlite3.Error as e:
                self._rollback()
                raise Determinate(f"sqlite consensus: truncate({key}) failed: {e}") from e
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise Indeterminate(f"sqlite consensus: truncate({key}) commit failed: {e}") from e
            return int(deleted)

    def list_keys(self) -> list[str]:
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT DISTINCT shard FROM consensus ORDER BY shard"
                ).fetchall()
            except sqlite3.Error as e:
                raise Determinate(f"sqlite consensus: list_keys failed: {e}") from e
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
