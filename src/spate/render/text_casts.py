"""Casts between text and the other types on Spark columns, as the reference evaluator parses
and prints them (PostgreSQL's forms): a text that does not parse is NULL here, and the caller
decides whether that is a failed cast (an error) or ``TRY_CAST``'s NULL.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F

from spate.render.scalar_funcs import float_text
from spate.repr.spark import spark_type
from spate.repr.types import ScalarKind, ScalarType

K = ScalarKind

# Characters Python's str.strip() removes (str.isspace()), as a Java regex character class.
_PY_SPACE: Final = (
    "[\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680"
    "\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
)
_DIGITS: Final = "[0-9]"
_INT_RE: Final = f"\\A[+-]?{_DIGITS}+\\z"
_DEC_BODY: Final = f"[+-]?({_DIGITS}+(\\.{_DIGITS}*)?|\\.{_DIGITS}+)"
_EXP: Final = f"[eE][+-]?{_DIGITS}+"
_FLOAT_RE: Final = f"\\A{_DEC_BODY}({_EXP})?\\z"
_NUMERIC_EXP_MAX: Final = 1000
"""PostgreSQL's numeric input takes exponents up to this size; beyond, it overflows (22003)."""
_FLOAT_SPECIAL_RE: Final = "(?i)\\A[+-]?(inf|infinity|nan)\\z"
_DATE_BODY: Final = f"{_DIGITS}{{4}}-{_DIGITS}{{2}}-{_DIGITS}{{2}}"
_DATE_RE: Final = f"\\A{_DATE_BODY}\\z"
_TS_RE: Final = (
    f"\\A{_DATE_BODY}([ T]{_DIGITS}{{2}}:{_DIGITS}{{2}}:{_DIGITS}{{2}}(\\.{_DIGITS}{{1,6}})?)?\\z"
)
_TRUE_WORDS: Final = ("t", "true", "y", "yes", "on", "1")
_FALSE_WORDS: Final = ("f", "false", "n", "no", "off", "0")


def canon_float(c: Column) -> Column:
    """``-0.0`` as ``0.0`` (the reference's canonical floats); NaN and NULL unchanged."""
    return F.when(c == F.lit(0.0), F.lit(0.0)).otherwise(c)


def _py_strip(s: Column) -> Column:
    """Python's ``str.strip()``: Unicode whitespace at both ends."""
    return F.regexp_replace(s, f"\\A{_PY_SPACE}+|{_PY_SPACE}+\\z", "")


def to_text(v: Column, source: ScalarType) -> Column:
    k = source.kind
    if k is K.FLOAT64:
        return float_text(v)
    if k is K.TIMESTAMP:
        # The reference prints with strftime("%Y"), which does not pad years below 1000.
        return F.regexp_replace(v.cast("string"), "^0+", "")
    return v.cast("string")


def from_text(v: Column, to: ScalarType) -> Column:
    k = to.kind
    st = spark_type(to)
    if k is K.JSONB:
        # Spark's parser stops after the first complete value and ignores what follows
        # ('{"a": 1}[1]', '1 2'). Inside '{"k": …}' and '[…]' the text must end where the value
        # does (only ``, "key": value`` may follow in the first, only ``, value`` in the
        # second, and no text passes both), so both must parse.
        in_object = F.try_parse_json(F.concat(F.lit('{"k":'), v, F.lit("}")))
        in_array = F.try_parse_json(F.concat(F.lit("["), v, F.lit("]")))
        return F.when(in_object.isNotNull() & in_array.isNotNull(), v)
    s = _py_strip(v)
    if k is K.INT64:
        return F.when(s.rlike(_INT_RE), s.try_cast(st))
    if k is K.NUMERIC:
        # As PostgreSQL: '1e2', '1.5E-3'; Spark's decimal parse takes the exponent and rounds
        # half away from zero to the scale. NaN and Infinity have no numeric value here.
        exp = F.regexp_extract(s, f"{_EXP}\\z", 0)
        exp_ok = (exp == F.lit("")) | (
            F.abs(F.substring(exp, 2, 12).try_cast("bigint")) <= F.lit(_NUMERIC_EXP_MAX)
        )
        return F.when(s.rlike(_FLOAT_RE) & exp_ok, s.try_cast(st))
    if k is K.FLOAT64:
        low = F.lower(s)
        special = (
            F.when(low.contains("nan"), F.lit(float("nan")))
            .when(low.startswith("-"), F.lit(float("-inf")))
            .otherwise(F.lit(float("inf")))
        )
        parsed = s.try_cast(st)
        # a finite number beyond the type's range ('1e400') does not convert (22003)
        number = canon_float(F.when(F.abs(parsed) != F.lit(float("inf")), parsed))
        return F.when(s.rlike(_FLOAT_RE), number).when(s.rlike(_FLOAT_SPECIAL_RE), special)
    if k is K.BOOL:
        low = F.lower(s)
        return F.when(low.isin(*_TRUE_WORDS), F.lit(True)).when(
            low.isin(*_FALSE_WORDS), F.lit(False)
        )
    if k in (K.DATE, K.TIMESTAMP):
        pattern = _DATE_RE if k is K.DATE else _TS_RE
        # Python has no year 0; Spark would parse it.
        ok = s.rlike(pattern) & ~s.startswith("0000")
        return F.when(ok, s.try_cast(st))
    return v
