"""The names of the scalar functions the IR knows: the vocabulary of
:class:`~spate.plan.expr.CallUnary`, :class:`~spate.plan.expr.CallBinary`,
:class:`~spate.plan.expr.CallVariadic`, ``DateTrunc`` and ``Extract``. Their types live in
:mod:`spate.plan.infer` and :mod:`spate.plan.funcs`, their meaning in the evaluators.
"""

from __future__ import annotations

from enum import StrEnum


class UnaryFunc(StrEnum):
    NOT = "not"
    IS_NULL = "is_null"
    NEG = "neg"
    ABS = "abs"
    LOWER = "lower"
    UPPER = "upper"
    LENGTH = "length"
    """Characters of a text, bytes of a bytes value."""
    TRIM = "trim"
    """Remove leading and trailing spaces (``' '`` only)."""
    EPOCH_MS = "epoch_ms"
    """timestamp → int64 milliseconds since 1970-01-01, rounded down."""
    EPOCH_MS_CEIL = "epoch_ms_ceil"
    """timestamp → int64 milliseconds since 1970-01-01, rounded up (temporal upper bounds)."""
    FROM_EPOCH_MS = "from_epoch_ms"
    """int64 milliseconds since 1970-01-01 → timestamp (out of range: evaluation error)."""


class BinaryFunc(StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    AND = "and"
    OR = "or"
    CONCAT = "concat"
    """text ``||`` text (NULL if either is NULL)."""
    LIKE = "like"
    """SQL LIKE: ``%`` any run, ``_`` one character, ``\\`` escapes; case-sensitive."""
    ILIKE = "ilike"
    TIMESTAMP_ADD_MS = "timestamp_add_ms"
    TIMESTAMP_SUB_MS = "timestamp_sub_ms"
    TIMESTAMP_DIFF_MS = "timestamp_diff_ms"
    """timestamp − timestamp in int64 milliseconds, rounded down."""
    DATE_ADD_DAYS = "date_add_days"
    DATE_DIFF_DAYS = "date_diff_days"


COMPARISONS: frozenset[BinaryFunc] = frozenset(
    {BinaryFunc.EQ, BinaryFunc.NE, BinaryFunc.LT, BinaryFunc.LE, BinaryFunc.GT, BinaryFunc.GE}
)
ARITHMETIC: frozenset[BinaryFunc] = frozenset(
    {BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD}
)


class VariadicFunc(StrEnum):
    COALESCE = "coalesce"
    GREATEST = "greatest"
    """The largest non-NULL argument (NULL only if all are)."""
    LEAST = "least"
    SUBSTR = "substr"
    """``substr(text, start[, count])``, 1-based, PostgreSQL rules (start < 1 eats count)."""
    # Functions with fixed signatures, PostgreSQL's semantics (see spate.plan.funcs).
    SQRT = "sqrt"
    CBRT = "cbrt"
    EXP = "exp"
    LN = "ln"
    LOG10 = "log10"
    POWER = "power"
    FLOAT4 = "float4"
    FLOAT4_TEXT = "float4_text"
    INT4_RANGE = "int4_range"
    INT2_RANGE = "int2_range"
    NUMERIC_SQRT = "numeric_sqrt"
    NUMERIC_EXP = "numeric_exp"
    NUMERIC_LN = "numeric_ln"
    NUMERIC_LOG = "numeric_log"
    NUMERIC_POWER = "numeric_power"
    REPLACE = "replace"
    STRPOS = "strpos"
    LPAD = "lpad"
    RPAD = "rpad"
    SPLIT_PART = "split_part"
    REPEAT = "repeat"
    REVERSE = "reverse"
    INITCAP = "initcap"
    MD5 = "md5"
    TRANSLATE = "translate"
    ASCII = "ascii"
    CHR = "chr"
    BTRIM = "btrim"
    LTRIM = "ltrim"
    RTRIM = "rtrim"
    OCTET_LENGTH = "octet_length"
    REGEXP_LIKE = "regexp_like"
    REGEXP_REPLACE = "regexp_replace"
    REGEXP_REPLACE_ALL = "regexp_replace_all"
    MAKE_DATE = "make_date"
    ADD_MONTHS = "add_months"
    TO_CHAR = "to_char"
    TO_CHAR_NUMERIC = "to_char_numeric"
    """``to_char(number, format)`` of a numeric (:mod:`spate.plan.numformat`); likewise
    ``to_char_int8``, ``to_char_int4`` (smallint and integer), ``to_char_float8`` and
    ``to_char_float4``: PostgreSQL formats each type its own way."""
    TO_CHAR_INT8 = "to_char_int8"
    TO_CHAR_INT4 = "to_char_int4"
    TO_CHAR_FLOAT8 = "to_char_float8"
    TO_CHAR_FLOAT4 = "to_char_float4"
    MAKE_INTERVAL = "make_interval"
    """``(months, days, microseconds)``: an interval result column (months and days in int32)."""
    TIMESTAMP_DIFF_US = "timestamp_diff_us"
    """``a - b`` in microseconds (the time of ``timestamp - timestamp``)."""
    # Intervals (spate.plan.interval_funcs).
    INTERVAL_MONTHS = "interval_months"
    INTERVAL_DAYS = "interval_days"
    INTERVAL_MICROS = "interval_micros"
    INTERVAL_KEY = "interval_key"
    INTERVAL_CANON = "interval_canon"
    INTERVAL_OF_KEY = "interval_of_key"
    INTERVAL_MUL = "interval_mul"
    INTERVAL_DIV = "interval_div"
    INTERVAL_EPOCH = "interval_epoch"
    INTERVAL_TEXT = "interval_text"
    TIMESTAMP_ADD_US = "timestamp_add_us"
    JUSTIFY_DAYS = "justify_days"
    JUSTIFY_HOURS = "justify_hours"
    JUSTIFY_INTERVAL = "justify_interval"
    INTERVAL_OF_TEXT = "interval_of_text"


class TimeUnit(StrEnum):
    YEAR = "year"
    QUARTER = "quarter"
    MONTH = "month"
    WEEK = "week"
    """date_trunc: the Monday of the ISO week; extract: the ISO week number."""
    DAY = "day"
    HOUR = "hour"
    MINUTE = "minute"
    SECOND = "second"
    DOW = "dow"
    """extract only: day of week, 0 = Sunday … 6 = Saturday."""
    DOY = "doy"
    """extract only: day of year, 1 … 366."""
