"""``to_char(number, format)``: PostgreSQL's numeric format patterns.

A format is parsed once (:func:`parse_number_format`) into its nodes and the description
PostgreSQL's ``NUMDesc_prepare`` builds (digits before and after the decimal point, where the
sign goes, the first and last ``0``, fill mode…). A value becomes text in two steps, as in
PostgreSQL's ``formatting.c``:

1. :func:`number_parts`: the value's digits as the type's ``to_char`` prepares them (numeric:
   rounded half away from zero to the format's decimals; ``double precision``: C's ``%.*f``
   with at most 15 significant digits; integers: their digits padded with zeros), its sign,
   and the blanks the format has before the first digit, or ``#`` in every digit place when
   the integer part does not fit. ``V`` multiplies by ``10^n`` first; ``EEEE`` gives the
   scientific form.
2. :func:`render`: ``NUM_processor`` writing the format's nodes with those digits (sign, fill
   mode, the ``0`` padding, group separators, ``PR`` brackets, trailing zeros dropped in fill
   mode…).

The locale is C: ``D`` is ``.``, ``G`` is ``,``, ``S`` is ``+``/``-``. Patterns spate does not
support (``L`` currency, ``RN`` roman numerals, ``TH`` ordinals, ``B``, ``C``, ``SP``) are
refused when the format is parsed.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Final

from spate.errors import EvalError

KEYWORDS: Final = (
    (",", ","), (".", "."), ("0", "0"), ("9", "9"), ("B", "B"), ("C", "C"), ("D", "D"),
    ("EEEE", "EEEE"), ("FM", "FM"), ("G", "G"), ("L", "L"), ("MI", "MI"), ("PL", "PL"),
    ("PR", "PR"), ("RN", "RN"), ("SG", "SG"), ("SP", "SP"), ("S", "S"), ("TH", "TH"),
    ("V", "V"), ("b", "B"), ("c", "C"), ("d", "D"), ("eeee", "EEEE"), ("fm", "FM"),
    ("g", "G"), ("l", "L"), ("mi", "MI"), ("pl", "PL"), ("pr", "PR"), ("rn", "RN"),
    ("sg", "SG"), ("sp", "SP"), ("s", "S"), ("th", "TH"), ("v", "V"),
)  # fmt: skip
"""PostgreSQL's number format keywords, in its matching order (longest first), and their ids."""

UNSUPPORTED: Final = frozenset({"B", "C", "L", "RN", "TH"})
"""Keyword ids spate refuses: currency, roman numerals, ordinals, blank and the no-op ``C``
(``SP`` writes nothing either, and is accepted)."""

Node = tuple[str, str]
"""``("kw", id)`` for a keyword, ``("lit", text)`` for text copied to the output."""


class NumberFormatError(EvalError):
    """A format PostgreSQL rejects (its message), or one spate does not support."""

    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message, sqlstate="0A000" if unsupported else "42601")
        self.unsupported = unsupported


@dataclass(frozen=True, slots=True)
class NumFormat:
    """A parsed number format: its nodes and PostgreSQL's ``NUMDesc`` of it."""

    nodes: tuple[Node, ...]
    pre: int = 0
    post: int = 0
    lsign: int = 0  # -1: before the digits, 1: after, 0: no S
    flags: frozenset[str] = frozenset()
    pre_lsign_num: int = 0
    multi: int = 0
    zero_start: int = 0
    zero_end: int = 0

    def has(self, flag: str) -> bool:
        return flag in self.flags


def parse_number_format(fmt: str) -> NumFormat:
    """``fmt`` as PostgreSQL parses a number format (its errors for invalid combinations)."""
    nodes: list[Node] = []
    num = NumFormat(())
    i = 0
    while i < len(fmt):
        kw = next(((k, v) for k, v in KEYWORDS if fmt.startswith(k, i)), None)
        if kw is not None:
            if kw[1] in UNSUPPORTED:
                raise NumberFormatError(
                    f'to_char number format pattern "{kw[0]}" is not supported', unsupported=True
                )
            nodes.append(("kw", kw[1]))
            num = _prepare(num, kw[1])
            i += len(kw[0])
            continue
        ch = fmt[i]
        if ch == '"':
            i += 1
            buf = []
            while i < len(fmt) and fmt[i] != '"':
                if fmt[i] == "\\" and i + 1 < len(fmt):
                    i += 1
                buf.append(fmt[i])
                i += 1
            i += 1
            nodes.extend(("lit", c) for c in buf)
            continue
        if ch == "\\" and fmt[i + 1 : i + 2] == '"':
            i += 1
            ch = '"'
        nodes.append(("lit", ch))
        i += 1
    return replace(num, nodes=tuple(nodes))


def _err(message: str) -> NumberFormatError:
    return NumberFormatError(message)


def _prepare(num: NumFormat, kw: str) -> NumFormat:
    """PostgreSQL's ``NUMDesc_prepare`` for one keyword."""
    f = set(num.flags)
    pre, post, multi = num.pre, num.post, num.multi
    lsign, pre_lsign_num, zero_start, zero_end = (
        num.lsign, num.pre_lsign_num, num.zero_start, num.zero_end,
    )  # fmt: skip
    if "EEEE" in f and kw != "EEEE":
        raise _err('"EEEE" must be the last pattern used')
    if kw in ("9", "0") and "BRACKET" in f:
        raise _err(f'"{kw}" must be ahead of "PR"')
    if kw == "9":
        if "MULTI" in f:
            multi += 1
        elif "DECIMAL" in f:
            post += 1
        else:
            pre += 1
    elif kw == "0":
        if "ZERO" not in f and "DECIMAL" not in f:
            f.add("ZERO")
            zero_start = pre + 1
        if "DECIMAL" not in f:
            pre += 1
        else:
            post += 1
        zero_end = pre + post
    elif kw in ("D", "."):
        if "DECIMAL" in f:
            raise _err("multiple decimal points")
        if "MULTI" in f:
            raise _err('cannot use "V" and decimal point together')
        f.add("DECIMAL")
    elif kw == "FM":
        f.add("FILLMODE")
    elif kw == "S":
        if "LSIGN" in f:
            raise _err('cannot use "S" twice')
        if f & {"PLUS", "MINUS", "BRACKET"}:
            raise _err('cannot use "S" and "PL"/"MI"/"SG"/"PR" together')
        if "DECIMAL" not in f:
            lsign, pre_lsign_num = -1, pre
            f.add("LSIGN")
        elif lsign == 0:
            lsign = 1
            f.add("LSIGN")
    elif kw in ("MI", "PL", "SG"):
        if "LSIGN" in f:
            raise _err(f'cannot use "S" and "{kw}" together')
        f |= {"MI": {"MINUS"}, "PL": {"PLUS"}, "SG": {"MINUS", "PLUS"}}[kw]
    elif kw == "PR":
        if f & {"LSIGN", "PLUS", "MINUS"}:
            raise _err('cannot use "PR" and "S"/"PL"/"MI"/"SG" together')
        f.add("BRACKET")
    elif kw == "V":
        if "DECIMAL" in f:
            raise _err('cannot use "V" and decimal point together')
        f.add("MULTI")
    elif kw == "EEEE":
        if "EEEE" in f:
            raise _err('cannot use "EEEE" twice')
        if f & {"FILLMODE", "LSIGN", "BRACKET", "MINUS", "PLUS", "MULTI"}:
            raise _err('"EEEE" is incompatible with other formats')
        f.add("EEEE")
    return NumFormat(
        num.nodes, pre, post, lsign, frozenset(f), pre_lsign_num, multi, zero_start, zero_end
    )


# --- the digits of a value -------------------------------------------------------------------

DIGITS: Final = {"float8": 15, "float4": 6}
"""C's ``DBL_DIG`` and ``FLT_DIG``: the most significant digits ``to_char`` of a double
(real) writes."""


@dataclass(frozen=True, slots=True)
class Parts:
    """What ``render`` writes: ``number`` (digits and ``.``, no sign), the sign (``+``/``-``),
    the blanks before the first digit, and the format with ``pre``/``post`` as the type's
    ``to_char`` adjusted them (``V``, a double's 15 digits)."""

    number: str
    sign: str
    pre_spaces: int
    fmt: NumFormat


def _fit(number: str, sign: str, fmt: NumFormat) -> Parts:
    dot = number.find(".")
    pre_len = dot if dot >= 0 else len(number)
    if pre_len < fmt.pre:
        return Parts(number, sign, fmt.pre - pre_len, fmt)
    if pre_len > fmt.pre:
        hashes = "#" * (fmt.pre + fmt.post + 1)
        return Parts(hashes[: fmt.pre] + "." + hashes[fmt.pre + 1 :], sign, 0, fmt)
    return Parts(number, sign, 0, fmt)


def _sci_float(v: float, post: int, fmt: NumFormat) -> Parts:
    if math.isnan(v) or math.isinf(v):
        text = "#" * (fmt.pre + fmt.post + 6)
        text = " " + text[1 : fmt.pre + 1] + "." + text[fmt.pre + 2 :]
    else:
        text = "%+.*e" % (post, v)  # noqa: UP031 (C's %e, as PostgreSQL formats it)
        if text.startswith("+"):
            text = " " + text[1:]
    return Parts(text, "+", 0, fmt)


def number_parts(value: Decimal | int | float, kind: str, fmt: NumFormat) -> Parts:
    """``value``'s digits as ``to_char`` of ``kind`` (``numeric``, ``float8``, ``float4``,
    ``int8``, ``int4``) prepares them for ``fmt``."""
    if kind == "numeric":
        assert isinstance(value, (Decimal, int))
        return _numeric_parts(Decimal(value), fmt)
    if kind in DIGITS:
        return _float_parts(float(value), fmt, kind)
    assert isinstance(value, int)
    if fmt.has("EEEE"):  # int4 through float8, int8 through numeric, as PostgreSQL does
        if kind == "int4":
            return _sci_float(float(value), fmt.post, fmt)
        return Parts(_numeric_sci(Decimal(value), fmt.post), "+", 0, fmt)
    if fmt.has("MULTI"):
        value *= 10**fmt.multi
        if kind == "int8" and not -(1 << 63) <= value < 1 << 63:
            raise EvalError("bigint out of range", sqlstate="22003")
        if kind == "int4" and not -(1 << 31) <= value < 1 << 31:
            raise EvalError("integer out of range", sqlstate="22003")
        fmt = replace(fmt, pre=fmt.pre + fmt.multi)
    sign = "-" if value < 0 else "+"
    digits = str(abs(value))
    if fmt.post:
        digits += "." + "0" * fmt.post
    return _fit(digits, sign, fmt)


def _numeric_parts(value: Decimal, fmt: NumFormat) -> Parts:
    if fmt.has("EEEE"):
        return Parts(_numeric_sci(value, fmt.post), "+", 0, fmt)
    if fmt.has("MULTI"):
        value = value.scaleb(fmt.multi)
        fmt = replace(fmt, pre=fmt.pre + fmt.multi)
    with localcontext() as ctx:
        ctx.prec = 1000
        rounded = value.quantize(Decimal(1).scaleb(-fmt.post), rounding=ROUND_HALF_UP)
    sign = "-" if rounded < 0 else "+"
    return _fit(f"{abs(rounded):f}", sign, fmt)


def _numeric_sci(value: Decimal, post: int) -> str:
    """PostgreSQL's ``numeric_out_sci`` (with a blank for the sign of a positive value): the
    exponent of the unrounded value, the significand rounded to ``post`` digits (so 99999 to
    one digit is ``10.0e+04``)."""
    exponent = 0 if value == 0 else value.adjusted()
    with localcontext() as ctx:
        ctx.prec = 1000
        sig = value.scaleb(-exponent).quantize(Decimal(1).scaleb(-post), rounding=ROUND_HALF_UP)
    text = f"{abs(sig):f}e{exponent:+03d}"
    return ("-" if sig < 0 else " ") + text


def _float_parts(v: float, fmt: NumFormat, kind: str) -> Parts:
    if fmt.has("EEEE"):
        return _sci_float(v, fmt.post, fmt)
    if fmt.has("MULTI"):
        v *= math.pow(10, fmt.multi)
        if kind == "float4":
            v = to_single(v)
        fmt = replace(fmt, pre=fmt.pre + fmt.multi)
    whole = _c_fixed(abs(v), 0)
    post, digits = fmt.post, DIGITS[kind]
    if len(whole) >= digits:
        post = 0
    elif len(whole) + post > digits:
        post = digits - len(whole)
    fmt = replace(fmt, post=post)
    text = _c_fixed(v, post)
    sign = "-" if text.startswith("-") else "+"
    return _fit(text.lstrip("-"), sign, fmt)


def to_single(v: float) -> float:
    """``v`` rounded to single precision, as a C ``float`` holds it (beyond its range: an
    infinity)."""
    try:
        return float(struct.unpack("f", struct.pack("f", v))[0])
    except OverflowError:
        return math.copysign(math.inf, v)


def _c_fixed(v: float, post: int) -> str:
    """``%.*f`` as PostgreSQL's ``snprintf`` writes it: the exact binary value rounded half
    to even, ``NaN``, ``Infinity``, ``-Infinity``."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "-Infinity" if v < 0 else "Infinity"
    return "%.*f" % (post, v)  # noqa: UP031


# --- NUM_processor ---------------------------------------------------------------------------


def render(parts: Parts) -> str:
    """PostgreSQL's ``NUM_processor`` writing ``parts`` in their format."""
    fmt = parts.fmt
    if fmt.has("EEEE"):
        return parts.number
    return _Processor(parts).run()


class _Processor:
    def __init__(self, parts: Parts) -> None:
        fmt = parts.fmt
        self.flags = set(fmt.flags)
        self.pre, self.post = fmt.pre, fmt.post
        self.zero_start = fmt.zero_start - 1 if fmt.zero_start else 0
        self.zero_end = fmt.zero_end
        self.lsign = fmt.lsign
        self.nodes = fmt.nodes
        self.number = parts.number + "\0"
        self.sign = parts.sign
        self.pre_spaces = parts.pre_spaces
        f = self.flags
        if f & {"PLUS", "MINUS"}:
            self.sign_wrote = not ("PLUS" in f and "MINUS" not in f)
        else:
            if self.sign != "-" and "FILLMODE" in f:
                f.discard("BRACKET")
            self.sign_wrote = self.sign == "+" and "FILLMODE" in f and "LSIGN" not in f
            if self.lsign == -1 and self.pre == fmt.pre_lsign_num:
                self.lsign = 1
        self.num_count = self.post + self.pre - 1
        self.last_relevant: int | None = None
        if "FILLMODE" in f and "DECIMAL" in f:
            self.last_relevant = _last_relevant(self.number)
            if self.last_relevant is not None and self.zero_end > self.pre_spaces:
                last_zero = min(len(parts.number) - 1, self.zero_end - self.pre_spaces)
                if self.last_relevant < last_zero:
                    self.last_relevant = last_zero
        if not self.sign_wrote and self.pre_spaces == 0:
            self.num_count += 1
        self.num_in = False
        self.num_curr = 0
        self.p = 0  # Np->number_p
        self.out: list[str] = []

    def char_at(self, i: int | None) -> str:
        if i is None or i >= len(self.number):
            return "\0"
        return self.number[i]

    def run(self) -> str:
        f = self.flags
        for kind, v in self.nodes:
            if kind == "lit":
                self.out.append(v)
                continue
            if v in ("9", "0", ".", "D"):
                self.numpart(v)
            elif v in (",", "G"):
                if not self.num_in:
                    if "FILLMODE" not in f:
                        self.out.append(" ")
                else:
                    self.out.append(",")
            elif v == "MI":
                if self.sign == "-":
                    self.out.append("-")
                elif "FILLMODE" not in f:
                    self.out.append(" ")
            elif v == "PL":
                if self.sign == "+":
                    self.out.append("+")
                elif "FILLMODE" not in f:
                    self.out.append(" ")
            elif v == "SG":
                self.out.append(self.sign)
        text = "".join(self.out)
        return text.split("\0", 1)[0]

    def predec_space(self) -> bool:
        return "ZERO" not in self.flags and self.p == 0 and self.number[0] == "0" and self.post != 0

    def numpart(self, kw: str) -> None:
        f, out = self.flags, self.out
        lr = self.last_relevant
        self.num_in = False
        if (
            not self.sign_wrote
            and (
                self.num_curr >= self.pre_spaces
                or ("ZERO" in f and self.zero_start == self.num_curr)
            )
            and (not self.predec_space() or (lr is not None and self.char_at(lr) == "."))
        ):
            if "LSIGN" in f:
                if self.lsign == -1:
                    out.append(self.sign)
                    self.sign_wrote = True
            elif "BRACKET" in f:
                out.append(" " if self.sign == "+" else "<")
                self.sign_wrote = True
            elif self.sign == "+":
                if "FILLMODE" not in f:
                    out.append(" ")
                self.sign_wrote = True
            elif self.sign == "-":
                out.append("-")
                self.sign_wrote = True
        if self.num_curr < self.pre_spaces and (self.zero_start > self.num_curr or "ZERO" not in f):
            if "FILLMODE" not in f:
                out.append(" ")
        elif "ZERO" in f and self.num_curr < self.pre_spaces and self.zero_start <= self.num_curr:
            out.append("0")
            self.num_in = True
        else:
            c = self.char_at(self.p)
            if c == ".":
                if lr is None or self.char_at(lr) != "." or "FILLMODE" in f:
                    out.append(".")
            elif lr is not None and self.p > lr and kw != "0":
                pass
            elif self.predec_space():
                if "FILLMODE" not in f:
                    out.append(" ")
                elif lr is not None and self.char_at(lr) == ".":
                    out.append("0")
            else:
                out.append(c)
                self.num_in = True
            if c != "\0":
                self.p += 1
        end = self.num_count + (1 if self.pre_spaces else 0) + (1 if "DECIMAL" in f else 0)
        if lr is not None and lr == self.p:
            end = self.num_curr
        if self.num_curr + 1 == end:
            if self.sign_wrote and "BRACKET" in f:
                out.append(" " if self.sign == "+" else ">")
            elif "LSIGN" in f and self.lsign == 1:
                out.append(self.sign)
        self.num_curr += 1


def _last_relevant(number: str) -> int | None:
    """PostgreSQL's ``get_last_relevant_decnum``: the last nonzero digit after the point (or
    the point; ``None`` without a point)."""
    p = number.find(".")
    if p < 0:
        return None
    result = p
    for i in range(p + 1, len(number)):
        if number[i] == "\0":
            break
        if number[i] != "0":
            result = i
    return result


MAX_DIGITS: Final = 150
"""The most digits (``9``, ``0``, ``V``'s) of a format spate writes."""
FLOAT_PLACES: Final = 18
"""The most integer digits (``V`` included) of a double's format on Spark: beyond, a double's
digits are not exact there (Spark has no exact decimal form of a double above ``2**63``)."""


def refusal(kind: str, fmt: NumFormat) -> str | None:
    """Why spate refuses ``fmt`` for ``kind`` (a format it cannot write exactly on Spark), or
    ``None``."""
    if fmt.has("EEEE"):
        return 'to_char number format "EEEE" is not supported'
    if fmt.pre + fmt.post + fmt.multi > MAX_DIGITS:
        return f"to_char number formats of more than {MAX_DIGITS} digits are not supported"
    if kind in DIGITS and fmt.pre + fmt.multi > FLOAT_PLACES:
        return (
            f"to_char of {'double precision' if kind == 'float8' else 'real'} with more than "
            f"{FLOAT_PLACES} integer digits in the format is not supported"
        )
    return None


def to_char_number(value: Decimal | int | float, kind: str, fmt: NumFormat) -> str:
    """``to_char(value, fmt)`` for a value of ``kind`` (see :func:`number_parts`)."""
    return render(number_parts(value, kind, fmt))
