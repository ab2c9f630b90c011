"""Text helpers of :mod:`spate.render.scalar`: SQL LIKE patterns as Java regular expressions,
PostgreSQL's ``substr``."""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

_INT_MAX: Final = 2_147_483_647


def java_regex_quote(ch: str) -> str:
    """One character as a literal in a Java regular expression."""
    if ch.isascii() and not ch.isalnum():
        return "\\" + ch
    return ch


def like_regex(pattern: str) -> str:
    """A SQL LIKE pattern (``%``, ``_``, ``\\`` escapes any next character) as a Java regex."""
    out = ["(?s)\\A"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(java_regex_quote(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else java_regex_quote(ch))
        i += 1
    out.append("\\z")
    return "".join(out)


def _like_regex_column(pattern: Column) -> Column:
    """:func:`like_regex` computed by Spark for a pattern that is not a literal."""
    n = F.char_length(pattern)

    def step(acc: Column, i: Column) -> Column:
        ch = F.substring(pattern, i.cast("int"), F.lit(1))
        quoted = F.concat(F.lit("\\Q"), ch, F.lit("\\E"))
        out, esc = acc["out"], acc["esc"]
        piece = (
            F.when(esc, quoted)
            .when((ch == F.lit("\\")) & (i < n), F.lit(""))
            .when(ch == F.lit("%"), F.lit(".*"))
            .when(ch == F.lit("_"), F.lit("."))
            .otherwise(quoted)
        )
        starts_escape = ~esc & (ch == F.lit("\\")) & (i < n)
        return F.struct(F.concat(out, piece).alias("out"), starts_escape.alias("esc"))

    init = F.struct(F.lit("").alias("out"), F.lit(False).alias("esc"))
    positions = F.when(n > 0, F.sequence(F.lit(1), n)).otherwise(F.array().cast("array<int>"))
    body = F.aggregate(positions, init, step)["out"]
    return F.when(pattern.isNotNull(), F.concat(F.lit("(?s)\\A"), body, F.lit("\\z")))


def _substr(text: Column, start: Column, count: Column | None = None) -> Column:
    """PostgreSQL ``substr`` (1-based; a start before 1 consumes count; negative count: NULL)."""
    dec = T.DecimalType(20, 0)
    begin = start.cast(dec)
    # Not greatest()/least(): they skip NULLs.
    first = F.when(begin < F.lit(1), F.lit(1).cast(dec)).otherwise(begin)
    limit = F.lit(_INT_MAX).cast(dec)
    pos = F.when(first > limit, limit).otherwise(first).cast("int")
    if count is None:
        return F.when(begin.isNotNull(), text.substr(pos, F.lit(_INT_MAX)))
    length = begin + count.cast(dec) - first
    piece = text.substr(pos, F.when(length > limit, limit).otherwise(length).cast("int"))
    return (
        F.when(count < F.lit(0), F.lit(None).cast("string"))
        .when(length <= F.lit(0), F.when(text.isNotNull(), F.lit("")))
        .otherwise(piece)
    )
