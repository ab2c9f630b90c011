"""spate's indexes in the catalog queries psql sends (``\\d t``'s "Indexes:", ``\\di``).

psql joins ``pg_class`` twice through ``pg_index i``: one alias is the indexed relation
(``… = i.indrelid``), the other the index (``… = i.indexrelid``). Those queries are rewritten
so each alias-qualified column reads its own object: ``c2.relname`` becomes ``c2__relname``,
and every row carries the ``<alias>__<column>`` values of the object that alias stands for.
SQLAlchemy's reflection query (``Inspector.get_indexes``: ``pg_index`` in full, each index's
columns aggregated into ``idx_cols.elements``) is recognised as a whole and answered by
:func:`sqlalchemy_indexes`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa

from spate.pgwire import types as pgt
from spate.pgwire.engine import Relation

_PSQL_INDEX: Final = re.compile(r"\bpg_index\s+i\b", re.I)


def roles(sql: str) -> dict[str, str] | None:
    """``{alias: "table" | "index"}`` for psql's pg_index joins; ``None`` for other queries."""
    if not _PSQL_INDEX.search(sql):
        return None
    out: dict[str, str] = {}
    for col, role in (("indrelid", "table"), ("indexrelid", "index")):
        for m in re.finditer(
            rf"\b(\w+)\.oid\s*=\s*i\.{col}\b|\bi\.{col}\s*=\s*(\w+)\.oid\b", sql, re.I
        ):
            out[(m.group(1) or m.group(2)).lower()] = role
    return out or None


def rewrite(sql: str, aliases: dict[str, str]) -> str:
    """``alias.column`` as ``alias__column`` for the aliases in ``aliases``."""
    for alias in aliases:
        sql = re.sub(rf"\b{alias}\s*\.\s*(\w+)", rf"{alias}__\1", sql, flags=re.I)
    return sql


def indexdef(index: Relation) -> str:
    cols = ", ".join(index.key)
    return f"CREATE INDEX {index.name} ON public.{index.on} USING arrangement ({cols})"


def _prefixed(alias: str, row: dict[str, Any]) -> dict[str, Any]:
    return {f"{alias}__{k}": v for k, v in row.items()}


def index_rows(
    relations: Sequence[Relation],
    class_rows: dict[str, dict[str, Any]],
    aliases: dict[str, str],
) -> list[dict[str, Any]]:
    """One row per index: pg_index's columns and each alias's object."""
    rows = []
    for r in relations:
        if r.kind != "index" or r.on not in class_rows:
            continue
        table, index = class_rows[r.on], class_rows[r.name]
        row = dict(index)
        row.update(index_columns(r, table["oid"]))
        for alias, role in aliases.items():
            row.update(_prefixed(alias, table if role == "table" else index))
        rows.append(row)
    return rows


def index_columns(index: Relation, table_oid: int) -> dict[str, Any]:
    return {
        "indexrelid": index.oid,
        "indrelid": table_oid,
        "indisprimary": False,
        "indisunique": False,
        "indisclustered": False,
        "indisvalid": True,
        "indisreplident": False,
        "indnatts": len(index.key),
        "indexdef": indexdef(index),
        "contype": None,
        "condeferrable": None,
        "condeferred": None,
    }


def with_tables(
    rows: list[dict[str, Any]],
    relations: Sequence[Relation],
    class_rows: dict[str, dict[str, Any]],
    aliases: dict[str, str],
) -> list[dict[str, Any]]:
    """pg_class rows (``\\di``) with the alias of the indexed relation filled in for indexes."""
    by_name = {r.name: r for r in relations if r.namespace == "public"}
    out = []
    for row in rows:
        row = dict(row)
        for alias, role in aliases.items():
            row.update(_prefixed(alias, row))  # the row's own object by default
            idx = by_name.get(row["relname"])
            if role == "table" and idx is not None and idx.kind == "index" and idx.on in class_rows:
                row.update(_prefixed(alias, class_rows[idx.on]))
                row.update(index_columns(idx, class_rows[idx.on]["oid"]))
        out.append(row)
    return out


_SQLALCHEMY_INDEXES: Final = re.compile(r"\bidx_cols\s*\.\s*elements\b", re.I)
_INDRELID_IN: Final = re.compile(r"pg_index\s*\.\s*indrelid\s+IN\s*\(([^()]*)\)", re.I)


def sqlalchemy_indexes(sql: str, relations: Sequence[Relation]) -> pa.Table | None:
    """The answer to SQLAlchemy's index reflection query (``None`` for any other query): one
    row per index of the relations whose oids it asks for (``pg_index.indrelid IN (…)``)."""
    if not _SQLALCHEMY_INDEXES.search(sql):
        return None
    asked_in = _INDRELID_IN.findall(sql)
    asked = {int(x) for x in re.findall(r"(?<![\w.])'?(\d+)'?", asked_in[-1])} if asked_in else None
    by_name = {r.name: r for r in relations}
    rows = []
    for r in relations:
        table = by_name.get(r.on or "")
        if r.kind != "index" or table is None or (asked is not None and table.oid not in asked):
            continue
        n = len(r.key)
        rows.append(
            {
                "indrelid": table.oid,
                "relname": r.name,
                "indisunique": False,
                "indisvalid": True,
                "has_constraint": False,
                "indoption": " ".join(["0"] * n),  # an int2vector, in its text form
                "reloptions": None,
                "relam": None,
                "filter_definition": None,
                "indnkeyatts": n,
                "indnullsnotdistinct": False,
                "elements": list(r.key),
                "elements_is_expr": [False] * n,
                "elements_opclass": [0] * n,
            }
        )
    rows.sort(key=lambda row: (row["indrelid"], row["relname"]))
    schema = pa.schema(
        [
            pgt.field_with_type("indrelid", "oid", pa.int64()),
            pa.field("relname", pa.string()),
            pa.field("indisunique", pa.bool_()),
            pa.field("indisvalid", pa.bool_()),
            pa.field("has_constraint", pa.bool_()),
            pa.field("indoption", pa.string()),
            pa.field("reloptions", pa.list_(pa.string())),
            pgt.field_with_type("relam", "oid", pa.int64()),
            pa.field("filter_definition", pa.string()),
            pa.field("indnkeyatts", pa.int64()),
            pa.field("indnullsnotdistinct", pa.bool_()),
            pa.field("elements", pa.list_(pa.string())),
            pa.field("elements_is_expr", pa.list_(pa.bool_())),
            pa.field("elements_opclass", pa.list_(pa.int64())),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)
