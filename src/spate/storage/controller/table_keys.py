"""Unique keys of tables, checked by the group committer where table writes are serialised.

A write to a table with PRIMARY KEY or UNIQUE constraints carries them (:class:`UniqueKey`);
inside the commit, after every earlier write (of its group too) and before any later one, the
committer counts the write's net change of each key (:func:`key_deltas`) and probes the
table's key counts (:meth:`~.table_contents.TableContents.key_counts`, a dictionary kept up
to date with every change the committer adds): a key that would be held by more than one row
fails the write with :class:`~spate.errors.UniqueViolation` (SQLSTATE 23505, PostgreSQL's
message and detail), and nothing of it is written. Two concurrent writers of the same key are
two writes of one group or of two groups, checked one after the other: exactly one wins.

Keys with a NULL in them never collide (PostgreSQL's ``NULLS DISTINCT``). A table without keys
costs nothing: its contents keep no key counts. A keyed table costs one dictionary entry per
key (built once from the kept contents, grouped in Arrow, the first time a write needs it) and,
per write, its rows' keys made Python values: a float key's NaN is not found equal to another
NaN (PostgreSQL's unique index finds them equal).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from spate.errors import UniqueViolation
from spate.repr.arrow import table_to_rows
from spate.repr.desc import DIFF_COLUMN
from spate.repr.types import Datum, Row


@dataclass(frozen=True, slots=True)
class UniqueKey:
    """A unique constraint as the committer checks it: its name and key columns."""

    name: str
    columns: tuple[str, ...]


def key_deltas(changes: pa.Table, columns: Sequence[str]) -> dict[Row, int]:
    """The net change of each key (without a NULL) in ``changes`` (data columns and
    ``_diff``), in the order the keys first appear."""
    out: dict[Row, int] = {}
    diffs = changes.column(DIFF_COLUMN).to_pylist()
    for key, diff in zip(table_to_rows(changes, list(columns)), diffs, strict=True):
        if None not in key:
            out[key] = out.get(key, 0) + diff
    return out


def add_keys(counts: dict[Row, int], keyed: Iterable[tuple[Row, int]]) -> None:
    """Add ``(key, diff)`` pairs to ``counts`` (a key whose count drops to 0 is removed)."""
    for key, diff in keyed:
        if None in key:
            continue
        n = counts.get(key, 0) + diff
        if n:
            counts[key] = n
        else:
            counts.pop(key, None)


def check_unique(key: UniqueKey, counts: dict[Row, int], deltas: dict[Row, int]) -> None:
    """Raise :class:`UniqueViolation` if adding ``deltas`` to ``counts`` leaves a key held by
    more than one row (the first such key, in the order of the write)."""
    for k, d in deltas.items():
        if d > 0 and counts.get(k, 0) + d > 1:
            raise UniqueViolation(
                f'duplicate key value violates unique constraint "{key.name}"',
                constraint=key.name,
                detail=f"Key ({', '.join(key.columns)})=({', '.join(map(_text, k))}) "
                "already exists.",
            )


def _text(value: Datum) -> str:
    """A key value as PostgreSQL's detail line shows it (its text output)."""
    if value is True:
        return "t"
    if value is False:
        return "f"
    return str(value)
