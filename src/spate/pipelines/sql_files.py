"""The datasets a pipeline's SQL file defines, read as ``spark-pipelines`` reads them.

A file holds statements separated by ``;``: ``CREATE [OR REFRESH] MATERIALIZED VIEW name
[(columns)] [COMMENT '…'] AS query``, ``CREATE [OR REFRESH] STREAMING TABLE name … AS query``
(``STREAM(t)``/``STREAM t`` read ``t``'s rows as they are appended), ``CREATE TEMPORARY VIEW
name AS query``, ``CREATE FLOW name AS INSERT INTO target BY NAME query``, and ``SET key =
value``. Each dataset's location is the line of its ``CREATE``.
"""

from __future__ import annotations

import re
from typing import Final

from sqlglot.dialects.spark import Spark
from sqlglot.tokenizer_core import TokenType

from spate.pipelines.errors import DefinitionError
from spate.pipelines.graph import Dataset, DatasetKind, Flow, Graph, Location

__all__ = ["register_sql_file", "split_statements"]

_IDENT: Final = r"(`[^`]+`|[\w.]+)"
_CREATE: Final = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REFRESH\s+)?(?P<kind>MATERIALIZED\s+VIEW|STREAMING\s+TABLE|"
    r"TEMPORARY\s+VIEW|TEMP\s+VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>" + _IDENT + r")"
    r"(?P<rest>.*?)\bAS\s+(?P<query>(?:SELECT|WITH|FROM|\().*)$",
    re.IGNORECASE | re.DOTALL,
)
_FLOW: Final = re.compile(
    r"^\s*CREATE\s+FLOW\s+(?P<name>"
    + _IDENT
    + r")\s+AS\s+INSERT\s+INTO\s+(?P<target>"
    + _IDENT
    + r")\s+(?:BY\s+NAME\s+)?(?P<query>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_COMMENT: Final = re.compile(r"\bCOMMENT\s+'((?:[^']|'')*)'", re.IGNORECASE)
_STREAM: Final = re.compile(r"\bSTREAM\s*\(\s*" + _IDENT + r"\s*\)|\bSTREAM\s+" + _IDENT, re.I)
_KINDS: Final = {
    "MATERIALIZEDVIEW": DatasetKind.MATERIALIZED_VIEW,
    "STREAMINGTABLE": DatasetKind.STREAMING_TABLE,
    "TEMPORARYVIEW": DatasetKind.TEMPORARY_VIEW,
    "TEMPVIEW": DatasetKind.TEMPORARY_VIEW,
}


def split_statements(text: str) -> list[tuple[int, str]]:
    """``text``'s statements with the line each starts on (``;`` inside strings and comments
    does not split)."""
    toks = Spark().tokenize(text)
    out: list[tuple[int, str]] = []
    start: int | None = None
    line = 1
    for tok in toks:
        if tok.token_type == TokenType.SEMICOLON:
            if start is not None:
                out.append((line, text[start : tok.start].strip()))
            start = None
            continue
        if start is None:
            start, line = tok.start, tok.line
    if start is not None:
        out.append((line, text[start:].strip()))
    return [(n, s) for n, s in out if s]


def _name(text: str) -> str:
    return text.strip("`")


def unstream(query: str) -> str:
    """``query`` with ``STREAM(t)``/``STREAM t`` read as ``t``."""
    return _STREAM.sub(lambda m: m.group(1) or m.group(2), query)


def register_sql_file(graph: Graph, text: str, file: str) -> None:
    """Add the datasets and flows of the SQL file ``file`` (its ``text``) to ``graph``."""
    for line, stmt in split_statements(text):
        where = Location(file, line)
        if re.match(r"^\s*SET\b", stmt, re.I):
            continue
        m = _CREATE.match(stmt)
        if m is not None:
            name = _name(m.group("name"))
            kind = _KINDS[re.sub(r"\s+", "", m.group("kind")).upper()]
            comment = _COMMENT.search(m.group("rest"))
            graph.add_dataset(
                Dataset(
                    name=name,
                    kind=kind,
                    location=where,
                    comment=None if comment is None else comment.group(1).replace("''", "'"),
                )
            )
            graph.add_flow(
                Flow(name=name, target=name, location=where, sql=unstream(m.group("query")))
            )
            continue
        f = _FLOW.match(stmt)
        if f is not None:
            graph.add_flow(
                Flow(
                    name=_name(f.group("name")),
                    target=_name(f.group("target")),
                    location=where,
                    sql=unstream(f.group("query")),
                )
            )
            continue
        raise DefinitionError(
            f"{where}: a pipeline SQL file defines datasets and flows (CREATE MATERIALIZED "
            f"VIEW, CREATE STREAMING TABLE, CREATE TEMPORARY VIEW, CREATE FLOW, SET); not: "
            f"{stmt[:80]!r}"
        )
