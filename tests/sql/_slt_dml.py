"""Seeded random rounds of INSERT / UPDATE / DELETE over a file's tables.

Values come from a small domain so that collisions happen (ints in [-3, 3], text in
{'', 'a', 'A', 'b', 'ab'}, numerics of scale 2, floats with -0.0, dates and timestamps near
one epoch, intervals in canonical form, NULL where the column allows it), mixed with values already in the column so that
joins and groups keep matching. A round is 1-20 operations: insert a new row, insert a copy of
an existing one, delete one copy, update one copy (delete + insert with one column changed);
one round of the run deletes everything from one table, so empty inputs are hit too.

A :class:`TableModel` holds each table's rows as PostgreSQL returned them; a round changes the
model, is applied to PostgreSQL in one transaction (a copy is deleted by ``ctid``), and its net
change per table (rows gone, rows new) is what the spate side applies.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tests.sql._slt_pg import PgScratch

Row = tuple[Any, ...]

_TEXT = ["", "a", "A", "b", "ab"]
_FLOATS = [-1.5, -0.0, 0.0, 0.5, 1.0, 2.25, 3.0]
_EPOCH = dt.datetime(2024, 1, 1)
_INTERVALS = ["00:00:00", "1 day", "1 mon", "02:00:00", "-1 days", "1 mon 2 days", "-03:00:00"]
"""Intervals in their canonical form (every field of one sign, days < 30, time < 24 h), so
that a group's representative is the same in PostgreSQL and spate."""


def spate_rows(model: TableModel, rows: list[Row]) -> list[Row]:
    """``rows`` of ``model``'s table as spate takes them (intervals, read by PostgreSQL's
    text, as ``Interval`` values)."""
    from spate.repr.interval_text import parse_interval

    at = [i for i, c in enumerate(model.columns) if c.type == "interval"]
    if not at:
        return rows
    return [
        tuple(parse_interval(v) if i in at and v is not None else v for i, v in enumerate(r))
        for r in rows
    ]


@dataclass
class Column:
    name: str
    type: str  # information_schema data_type
    nullable: bool
    scale: int | None
    length: int | None


@dataclass
class TableModel:
    name: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)


def _stored(col: Column, v: Any) -> Any:
    """A value read from PostgreSQL as spate stores it: a ``real`` (which psycopg reads from
    its shortest digits, ``0.1``) as its single-precision value."""
    if col.type == "real" and isinstance(v, float) and math.isfinite(v):
        return struct.unpack("f", struct.pack("f", v))[0]
    return v


def load(pg: PgScratch, tables: list[str]) -> dict[str, TableModel]:
    assert pg.conn is not None
    models: dict[str, TableModel] = {}
    for name in tables:
        cols = pg.conn.execute(
            "SELECT column_name, data_type, is_nullable, numeric_scale, character_maximum_length"
            " FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
            " ORDER BY ordinal_position",
            (pg.schema, name),
        ).fetchall()
        columns = [Column(c[0], c[1], c[2] == "YES", c[3], c[4]) for c in cols]
        rows = [
            tuple(_stored(c, v) for c, v in zip(columns, r, strict=True))
            for r in pg.conn.execute(f"SELECT * FROM {name}").fetchall()
        ]
        models[name] = TableModel(name, columns, rows)
    return models


def _value(rng: random.Random, col: Column, existing: list[Any]) -> Any:
    if col.nullable and rng.random() < 0.15:
        return None
    present = [v for v in existing if v is not None]
    if present and rng.random() < 0.5:
        return rng.choice(present)
    t = col.type
    if t in ("bigint", "integer", "smallint"):
        return rng.randint(-3, 3)
    if t == "numeric":
        scale = 2 if col.scale is None else col.scale
        return (Decimal(rng.randint(-300, 300)) / 100).quantize(Decimal(1).scaleb(-scale))
    if t in ("double precision", "real"):
        return rng.choice(_FLOATS)
    if t in ("text", "character varying"):
        text = rng.choice(_TEXT)
        return text[: col.length] if col.length else text
    if t == "boolean":
        return rng.random() < 0.5
    if t == "date":
        return (_EPOCH + dt.timedelta(days=rng.randint(-2, 40))).date()
    if t == "timestamp without time zone":
        return _EPOCH + dt.timedelta(hours=rng.randint(-24, 24 * 40))
    if t == "interval":
        return rng.choice(_INTERVALS)
    raise NotImplementedError(f"no random values for column type {t}")


def _new_row(rng: random.Random, m: TableModel) -> Row:
    return tuple(_value(rng, c, [r[i] for r in m.rows]) for i, c in enumerate(m.columns))


@dataclass
class Round:
    """A round's net change per table: ``(rows gone, rows new)``, each a multiset."""

    changes: dict[str, tuple[Counter[Row], Counter[Row]]]
    description: list[str]


def random_round(
    rng: random.Random, models: dict[str, TableModel], *, clear: bool, max_rows: int = 40
) -> tuple[Round, list[tuple[str, str, Row]]]:
    """Draw a round and apply it to ``models``; return it with the operations to replay on
    PostgreSQL (``("insert" | "delete", table, row)`` in order)."""
    before = {n: Counter(m.rows) for n, m in models.items()}
    ops: list[tuple[str, str, Row]] = []
    names = sorted(models)
    if clear:
        victim = models[rng.choice(names)]
        ops.extend(("delete", victim.name, r) for r in victim.rows)
        victim.rows = []
    for _ in range(rng.randint(1, 20)):
        m = models[rng.choice(names)]
        kind = rng.choice(["insert", "insert", "duplicate", "delete", "update"])
        if not m.rows or (kind == "insert" and len(m.rows) < max_rows):
            kind = "insert"
        elif len(m.rows) >= max_rows and kind in ("insert", "duplicate"):
            kind = "delete"
        if kind == "insert":
            row = _new_row(rng, m)
            m.rows.append(row)
            ops.append(("insert", m.name, row))
        elif kind == "duplicate":
            row = rng.choice(m.rows)
            m.rows.append(row)
            ops.append(("insert", m.name, row))
        elif kind == "delete":
            row = m.rows.pop(rng.randrange(len(m.rows)))
            ops.append(("delete", m.name, row))
        else:
            i = rng.randrange(len(m.rows))
            old = m.rows[i]
            j = rng.randrange(len(m.columns))
            fresh = _value(rng, m.columns[j], [r[j] for r in m.rows])
            new = (*old[:j], fresh, *old[j + 1 :])
            m.rows[i] = new
            ops.extend([("delete", m.name, old), ("insert", m.name, new)])
    changes: dict[str, tuple[Counter[Row], Counter[Row]]] = {}
    for n, m in models.items():
        after = Counter(m.rows)
        gone, new = before[n] - after, after - before[n]
        if gone or new:
            changes[n] = (gone, new)
    description = [f"{k} {t} {r!r}" for k, t, r in ops]
    return Round(changes, description), ops


def apply_to_postgres(pg: PgScratch, models: dict[str, TableModel], ops: list[Any]) -> None:
    """Replay ``ops`` in one transaction; a delete removes one copy (by ``ctid``)."""
    assert pg.conn is not None
    with pg.conn.transaction():
        for kind, table, row in ops:
            cols = models[table].columns
            if kind == "insert":
                marks = ", ".join(["%s"] * len(row))
                pg.conn.execute(f"INSERT INTO {table} VALUES ({marks})", row)
            else:
                match = " AND ".join(f"{c.name} IS NOT DISTINCT FROM %s" for c in cols)
                cur = pg.conn.execute(
                    f"DELETE FROM {table} WHERE ctid = "
                    f"(SELECT ctid FROM {table} WHERE {match} LIMIT 1)",
                    row,
                )
                assert cur.rowcount == 1, f"no row {row!r} to delete from {table}"
