"""A query text split into its statements by the SQL layer, each a text of its own."""

from __future__ import annotations

from spate.sql import Parsed
from spate.sql import parse as parse_sql
from spate.sql.parse import Source


def split_statements(text: str) -> list[tuple[int, Parsed]]:
    """The statements of ``text``, split and tokenized by the SQL layer (once), each with
    where it starts in ``text`` and made a text of its own (positions counted from it)."""
    out = []
    for parsed in parse_sql(text):
        start = parsed.source.start
        for tok in parsed.tokens:
            tok.start -= start
            tok.end -= start
        source = Source(parsed.sql, 0, len(parsed.sql), parsed.source.dialect)
        out.append((start, Parsed(source, parsed.tokens)))
    return out
