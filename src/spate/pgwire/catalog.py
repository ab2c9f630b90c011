"""Answers to the catalog queries PostgreSQL clients send (pg_catalog, information_schema,
``version()``, ``current_setting()``…), computed from the engine's relations.

Clients ask a small set of known queries (psql's ``\\d`` family, SQLAlchemy's reflection,
driver probes). Each is recognised by what it reads (:mod:`spate.pgwire.catalog_queries`) and
answered with rows built from :meth:`Engine.relations`; a catalog query that is not recognised
gets zero rows with the columns it selects, which is what clients expect of an object that
has no such property (no constraints, no comments, no inheritance).
"""

from __future__ import annotations

import re
from typing import Final

import pyarrow as pa

from spate.pgwire.catalog_queries import answer_known, select_list_names
from spate.pgwire.engine import Context, Engine, Rows

_CATALOG: Final = re.compile(
    r"\bpg_catalog\s*\.|\binformation_schema\s*\.|\bpg_(?:class|namespace|attribute|type|"
    r"index|constraint|database|roles|user|settings|tables|views|matviews|am|proc|cursors|"
    r"description|attrdef|collation|inherits|range|policy|extension|tablespace|depend|"
    r"sequence|stat_\w+|statistic_ext|publication\w*|opclass|authid|get_\w+|table_is_visible|"
    r"type_is_visible|advisory_\w+|encoding_to_char|backend_pid|is_in_recovery|"
    r"postmaster_start_time)\b|\bversion\s*\(|\bcurrent_(?:schema|schemas|database|setting|"
    r"user|role|catalog)\b|\bsession_user\b|\b(?:obj|col)_description\s*\(|\bset_config\s*\(|\bto_reg\w+\s*\(|\bformat_type\s*\(|"
    r"::\s*reg\w+",
    re.I,
)

_WINDOW: Final = 4096
_OVERLAP: Final = 256  # longer than any name the pattern looks for
_KEYS: Final = (  # every match holds one of these
    "pg_", "information_schema", "version", "current_", "session_user", "set_config", "to_reg",
    "format_type", "::",
)  # fmt: skip


class Catalog:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def handles(self, sql: str) -> bool:
        """Whether ``sql`` names the catalog. A long text is searched a window at a time (each
        search holds the GIL; the whole of a 10 MiB text at once would stall every thread for
        seconds); a match cut off at a window's end is checked against the whole text."""
        if len(sql) <= _WINDOW:
            return _CATALOG.search(sql) is not None
        for start in range(0, len(sql), _WINDOW):
            at, stop = start, min(len(sql), start + _WINDOW + _OVERLAP)
            window = sql[start:stop].lower()
            if not any(key in window for key in _KEYS):
                continue
            while (m := _CATALOG.search(sql, at, stop)) is not None:
                if m.end() < stop or _CATALOG.match(sql, m.start()) is not None:
                    return True
                at = m.start() + 1
        return False

    def answer(self, sql: str, ctx: Context) -> Rows:
        known = answer_known(sql, ctx.vars, self._engine.relations)
        if known is not None:
            return Rows(known, f"SELECT {known.num_rows}")
        names = select_list_names(sql)
        table = pa.table({n: pa.array([], pa.string()) for n in _unique(names)})
        return Rows(table, "SELECT 0")

    def describe(self, sql: str, ctx: Context) -> pa.Schema:
        return self.answer(sql, ctx).table.schema  # type: ignore[union-attr]


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if n in seen:
            seen[n] += 1
            out.append(f"{n}_{seen[n]}")
        else:
            seen[n] = 0
            out.append(n)
    return out
