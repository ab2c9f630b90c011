"""``to_char(number, format)`` on Spark: the format compiled into column expressions.

The output of PostgreSQL's ``NUM_processor`` (:mod:`spate.plan.numformat`) for a constant
format depends on the value only through a few facts: its sign, how many integer digits it
has, whether its integer part is ``0``, how many decimals the type's ``to_char`` keeps (a
double keeps at most 15 significant digits) and, in fill mode, which is the last nonzero
decimal. Every other digit is copied to a fixed place. So for each combination the
reference renderer is run once, at plan time, on a number whose digits are placeholders,
and the result becomes a Spark ``concat`` of literal text and single digits of the value;
a ``CASE`` picks the combination of each row.

The digits themselves are exact: a numeric's come from its decimal text (rounded half away
from zero by Spark's decimal ``round``), an integer's from its text, a double's from
``format_number`` (Java's ``DecimalFormat`` rounds the binary value half to even, as C's
``%.*f`` does) below ``2**53`` and from its ``long`` value above (where a double is an
integer). Formats that would need a double's digits beyond 18 integer places, and
``EEEE``, are refused when planned (:func:`spate.plan.numformat.refusal`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.plan.numformat import (
    DIGITS,
    NumFormat,
    Parts,
    parse_number_format,
    render,
    to_char_number,
)
from spate.render.let import let
from spate.repr.types import ScalarType

CheckFn = Callable[..., Column]

_MARK: Final = 0xE000
"""Placeholders for the value's digits: private-use characters ``U+E000 + i``."""
_MARKS: Final = "".join(chr(_MARK + i) for i in range(200))
_EXACT_LONG: Final = float(1 << 53)
_LONG_END: Final = float(1 << 63)


def _marks(start: int, n: int) -> str:
    return _MARKS[start : start + n]


def _templates(fmt: NumFormat, post: int) -> list[str]:
    """The text of every case (see :func:`_key`) of a value with ``post`` decimals, digits
    as placeholders: the ``i``-th digit of the value (integer part, then the decimals) is
    ``U+E000 + i``."""
    f = replace(fmt, post=post)
    pre = f.pre
    fill_decimal = f.has("FILLMODE") and f.has("DECIMAL") and post > 0
    out = []
    for sign in "+-":
        for n in range(pre + 2):
            for last in range(-1, post):
                if n == pre + 1:
                    number = "#" * pre + "." + "#" * post
                    spaces = 0
                else:
                    ip = "0" if n == 0 else _marks(0, n)
                    k = max(n, 1)  # where the decimals start
                    if fill_decimal:
                        fp = _marks(k, last + 1) + "0" * (post - last - 1)
                    else:
                        fp = _marks(k, post)
                    number = ip + ("." + fp if post else "")
                    spaces = pre - max(n, 1)
                out.append(render(Parts(number, sign, spaces, f)))
    return out


def _written(fmt: NumFormat, digits: Column, neg: Column, posts: dict[int, Column] | int) -> Column:
    """``fmt`` (``pre`` already counting ``V``'s digits) written for a value whose digits
    (integer part, then its decimals) are ``digits`` and whose sign is ``neg``: the template
    of its case with the placeholders replaced by the digits. The value has ``posts``
    decimals, or, for a double, one of the keys of ``posts`` (where its condition holds).

    The case is the number of decimals, the sign, how many integer digits (0 for a zero
    integer part, ``pre + 1`` beyond the format) and the last nonzero decimal (-1: none)."""
    pre = fmt.pre
    choices = {posts: F.lit(True)} if isinstance(posts, int) else posts
    templates: list[str] = []
    offset: Column | None = None
    post: Column | None = None
    for p, cond in sorted(choices.items()):
        start = F.lit(len(templates))
        offset = F.when(cond, start) if offset is None else offset.when(cond, start)
        post = F.when(cond, F.lit(p)) if post is None else post.when(cond, F.lit(p))
        templates += _templates(fmt, p)
    assert offset is not None and post is not None
    if isinstance(posts, int):
        offset, post = F.lit(0), F.lit(posts)
    array = F.array(*[F.lit(t) for t in templates])
    sign = F.when(neg, F.lit(1)).otherwise(F.lit(0))

    def write(pc: Column, d: Column) -> Column:
        def at(n_int: Column) -> Column:
            zero = (n_int == F.lit(1)) & (F.substring(d, 1, 1) == F.lit("0"))
            n = F.when(n_int > F.lit(pre), F.lit(pre + 1)).when(zero, F.lit(0)).otherwise(n_int)
            frac = d.substr(n_int + F.lit(1), pc)
            last = F.length(F.regexp_replace(frac, "0+$", "")) - F.lit(1)
            base = offset + sign * F.lit(pre + 2) * (pc + F.lit(1)) + F.lit(2)
            template = F.element_at(array, base + n * (pc + F.lit(1)) + last)
            return F.call_function("translate", template, F.lit(_MARKS), d)

        return let(at, v=F.length(d) - pc)

    if isinstance(posts, int):
        return let(lambda d: write(post, d), v=digits)
    return let(lambda pc: let(lambda d: write(pc, d), v=digits), v=post)


def _strip(digits: Column, post: int) -> Column:
    """Unsigned digits without leading zeros, at least ``post + 1`` of them."""
    d = F.regexp_replace(digits, "^0+", "")
    return F.when(F.length(d) < F.lit(post + 1), F.lpad(d, post + 1, "0")).otherwise(d)


def _numeric(v: Column, t: ScalarType, fmt: NumFormat) -> Column:
    scale = t.scale or 0
    keep = fmt.multi + fmt.post  # decimals of the value kept (V shifts them into the integer)
    if keep >= scale:
        raw = F.translate(v.cast("string"), "-.", "")
        if keep > scale:
            raw = F.concat(raw, F.lit("0" * (keep - scale)))
    else:
        raw = F.translate(F.round(v, keep).cast("string"), "-.", "")
    digits = _strip(raw, fmt.post)
    neg = (v < F.lit(0)) & (F.regexp_replace(digits, "0", "") != F.lit(""))
    return _written(_with_multi(fmt), digits, neg, fmt.post)


def _with_multi(fmt: NumFormat) -> NumFormat:
    return replace(fmt, pre=fmt.pre + fmt.multi) if fmt.has("MULTI") else fmt


def _integer(v: Column, kind: str, fmt: NumFormat, what: str, check: CheckFn) -> Column:
    x = v
    if fmt.has("MULTI"):
        dec = T.DecimalType(38, 0)
        big = 10 ** min(fmt.multi, 20)  # beyond, every nonzero value is out of range
        wide = v.cast(dec) * F.lit(Decimal(big)).cast(dec)
        bound = F.lit(Decimal(1 << 63 if kind == "int8" else 1 << 31)).cast(dec)
        name = "bigint" if kind == "int8" else "integer"
        bad = (wide >= bound) | (wide < -bound)
        x = check(F.when(~bad, wide.cast("long")), (bad, "22003", f"{name} out of range in {what}"))
    text = x.cast("string")
    digits = F.concat(F.regexp_replace(text, "^-", ""), F.lit("0" * fmt.post))
    return _written(_with_multi(fmt), digits, x < F.lit(0), fmt.post)


def _float(v: Column, kind: str, fmt: NumFormat) -> Column:
    x = v
    if fmt.has("MULTI"):
        x = x * F.lit(math.pow(10, fmt.multi))
        if kind == "float4":
            x = x.cast("float").cast("double")
    a = F.abs(x)
    limit = DIGITS[kind]
    whole = F.length(F.translate(F.format_number(a, 0), ",", ""))
    exact_long = (a >= F.lit(_EXACT_LONG)) & (a < F.lit(_LONG_END))
    n_whole = F.when(a < F.lit(_EXACT_LONG), whole).when(
        exact_long, F.length(a.cast("long").cast("string"))
    )
    n_whole = n_whole.otherwise(F.lit(99))

    def written(nw: Column) -> Column:
        posts: dict[int, Column] = {}
        for n in range(1, limit + 1):
            p = 0 if n >= limit else min(fmt.post, limit - n)
            cond = nw == F.lit(n)
            posts[p] = posts[p] | cond if p in posts else cond
        big = nw > F.lit(limit)
        posts[0] = posts[0] | big if 0 in posts else big
        fixed: Column | None = None
        for p, cond in sorted(posts.items()):
            text_p = F.format_number(x, p)
            fixed = F.when(cond, text_p) if fixed is None else fixed.when(cond, text_p)
        assert fixed is not None
        text = F.when(exact_long, x.cast("long").cast("string")).otherwise(
            F.translate(fixed, ",", "")
        )
        f = _with_multi(fmt)
        return let(
            lambda t: _written(f, F.translate(t, "-.", ""), t.startswith("-"), posts), v=text
        )

    out = let(written, v=n_whole)
    for special in (math.nan, math.inf, -math.inf):
        hit = F.isnan(x) if math.isnan(special) else x == F.lit(special)
        out = F.when(hit, F.lit(to_char_number(special, kind, fmt))).otherwise(out)
    return out


def compile_to_char_number(
    v: Column, kind: str, fmt_text: str, t: ScalarType, what: str, check: CheckFn
) -> Column:
    """``to_char`` of ``kind`` (see :data:`spate.plan.funcs.TO_CHAR_NUMBER`) of the column
    ``v`` (of stored type ``t``) with the constant format ``fmt_text``."""
    fmt = parse_number_format(fmt_text)
    if kind == "numeric":
        out = _numeric(v, t, fmt)
    elif kind in DIGITS:
        out = _float(v, kind, fmt)
    else:
        out = _integer(v, kind, fmt, what, check)
    return F.when(v.isNotNull(), out)
