"""What each key of an ``ENVELOPE UPSERT`` Kafka source holds now, on local disk.

The state maps a key's *identity* (bytes: see :func:`spate.storage.sources.kafka.envelope.
key_identity`) to what the key holds: a row of the source's ``data`` output or of its
``errors`` output. It is an SQLite database (the standard library's ``sqlite3``) in a
directory of its own, so the key set lives on disk, not in Python: applying a batch of
records reads only the keys of that batch (:meth:`UpsertState.get_many`) and writes back the
ones that changed (:meth:`UpsertState.write`). ``max_resident`` counts the most entries
ever held in Python at once (one batch's distinct keys).

Changes are made in one open transaction that :meth:`commit` ends (the source's point is
then durable downstream) or :meth:`rollback` undoes (the point was not bound: the state goes
back to the last committed point). The file is a cache, not the state of record: a new
reader starts from an empty one and rebuilds it from the source's outputs in persist
(:meth:`spate.storage.sources.kafka.reader.KafkaReader.restore`), so the database is written
without syncs and removed on :meth:`close`. Its directory is named after the process that
made it; one left by a process that is gone (a killed storage replica) is removed when the
next state is made in the same directory.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Collection, Iterable, Mapping
from typing import Final

import msgpack

from spate.errors import SourceError
from spate.repr.types import Row

Held = tuple[str, Row]
"""What a key holds: ``(output name, row)``."""

_IN_CHUNK: Final = 500  # keys per ``IN (…)`` lookup, well under SQLite's variable limit
_CACHE_KIB: Final = 16 * 1024  # SQLite's page cache: what it keeps in memory at most
_PREFIX: Final = "spate-upsert-"
_DATETIME: Final = 1  # msgpack extension codes of the datums msgpack has no type for
_DATE: Final = 2
_DECIMAL: Final = 3


def _default(value: object) -> msgpack.ExtType:
    if isinstance(value, dt.datetime):
        return msgpack.ExtType(_DATETIME, value.isoformat().encode())
    if isinstance(value, dt.date):
        return msgpack.ExtType(_DATE, value.isoformat().encode())
    if isinstance(value, decimal.Decimal):
        return msgpack.ExtType(_DECIMAL, str(value).encode())
    raise SourceError(f"UPSERT state: cannot keep a {type(value).__name__} datum")


def _ext(code: int, data: bytes) -> object:
    text = data.decode()
    if code == _DATETIME:
        return dt.datetime.fromisoformat(text)
    if code == _DATE:
        return dt.date.fromisoformat(text)
    if code == _DECIMAL:
        return decimal.Decimal(text)
    return msgpack.ExtType(code, data)


def _remove_orphans(directory: str | None) -> None:
    """Remove the state directories in ``directory`` of processes that are gone."""
    parent = directory if directory is not None else tempfile.gettempdir()
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name[len(_PREFIX) :].split("-", 1)[0]
        if not name.startswith(_PREFIX) or not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def encode_row(row: Row) -> bytes:
    """A row as bytes (msgpack; datetimes, dates and decimals as extensions)."""
    return msgpack.packb(row, default=_default, use_bin_type=True, datetime=False)  # type: ignore[no-any-return]


def decode_row(data: bytes) -> Row:
    out = msgpack.unpackb(data, ext_hook=_ext, use_list=False, raw=False, timestamp=0)
    assert isinstance(out, tuple)
    return out


class UpsertState:
    """The key state of one source on local disk (see the module docs)."""

    def __init__(self, directory: str | None = None) -> None:
        _remove_orphans(directory)
        self._dir = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=directory)
        try:
            self._db = sqlite3.connect(
                f"{self._dir}/state.db", isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA synchronous = OFF")
            self._db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
            self._db.execute(
                "CREATE TABLE state (k BLOB PRIMARY KEY, output TEXT NOT NULL, row BLOB NOT NULL)"
                " WITHOUT ROWID"
            )
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self.max_resident = 0

    def _begin(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN")

    def get_many(self, keys: Collection[bytes]) -> dict[bytes, Held]:
        """What each of ``keys`` holds (keys that hold nothing are absent)."""
        self.max_resident = max(self.max_resident, len(keys))
        out: dict[bytes, Held] = {}
        wanted = list(keys)
        for i in range(0, len(wanted), _IN_CHUNK):
            part = wanted[i : i + _IN_CHUNK]
            marks = ",".join("?" * len(part))
            for k, output, row in self._db.execute(
                f"SELECT k, output, row FROM state WHERE k IN ({marks})",  # noqa: S608 (only ?s)
                part,
            ):
                out[bytes(k)] = (output, decode_row(row))
        return out

    def write(self, changes: Mapping[bytes, Held | None]) -> None:
        """Set what each key holds (``None``: nothing), in the open transaction."""
        self._begin()
        puts = [(k, h[0], encode_row(h[1])) for k, h in changes.items() if h is not None]
        gone = [(k,) for k, h in changes.items() if h is None]
        if gone:
            self._db.executemany("DELETE FROM state WHERE k = ?", gone)
        if puts:
            self._db.executemany("INSERT OR REPLACE INTO state VALUES (?, ?, ?)", puts)

    def insert_new(self, entries: Iterable[tuple[bytes, Held]]) -> int:
        """Add entries of keys that hold nothing yet, in the open transaction; how many keys
        were already there (each keeps its first entry)."""
        self._begin()
        rows = [(k, h[0], encode_row(h[1])) for k, h in entries]
        before = self._db.total_changes
        self._db.executemany("INSERT OR IGNORE INTO state VALUES (?, ?, ?)", rows)
        return len(rows) - (self._db.total_changes - before)

    def clear(self) -> None:
        """Hold nothing for any key, in the open transaction."""
        self._begin()
        self._db.execute("DELETE FROM state")

    def commit(self) -> None:
        if self._db.in_transaction:
            self._db.execute("COMMIT")

    def rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def __len__(self) -> int:
        (n,) = self._db.execute("SELECT count(*) FROM state").fetchone()
        return int(n)

    def close(self) -> None:
        self._db.close()
        shutil.rmtree(self._dir, ignore_errors=True)
