"""Arrow types as PostgreSQL types: OIDs, text and binary encoders, parameter decoders.

Every spate scalar type (:mod:`spate.repr.types`) has a fixed PostgreSQL type:

=================  ==================  =====
spate              PostgreSQL          OID
=================  ==================  =====
bool               boolean             16
int64              bigint (int8)       20
float64            double precision    701
numeric(p,s)       numeric(p,s)        1700
text               text                25
bytes              bytea               17
date               date                1082
timestamp          timestamp           1114
jsonb              jsonb               3802
interval           interval            1186
=================  ==================  =====

Other Arrow types (the catalog's relations, computed columns) map the usual way: int32 is
``int4``, a timestamp with a time zone is ``timestamptz`` (sent in UTC), a list is an array of
its element type. A field may name its PostgreSQL type outright in its metadata
(``pg.type = "oid"``), which the catalog relations use for ``oid``, ``name`` and ``char``.

Text formats are PostgreSQL's (``t``/``f``, shortest round-trip floats and ``NaN``/``Infinity``,
``\\x`` hex bytea, ISO timestamps without trailing zeros); binary formats are big-endian,
timestamps and dates counted from 2000-01-01, numeric in base-10000 digit groups.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import pyarrow as pa

from spate.errors import UsageError
from spate.pgwire.errors import PgError
from spate.plan.evaluation.casts import float_text as single_text
from spate.repr.interval import Interval
from spate.sql.results import PG_TYPE_KEY

Encoder = Callable[[Any], bytes]
Decoder = Callable[[bytes], Any]

_EPOCH_DATE: Final = dt.date(2000, 1, 1)
_EPOCH_TS: Final = dt.datetime(2000, 1, 1)
_EPOCH_TSZ: Final = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_META: Final = PG_TYPE_KEY


class InvalidParameter(UsageError, ValueError):
    """A bound parameter value that does not decode as its declared type (22P02)."""

    sqlstate = "22P02"


@dataclass(frozen=True, slots=True)
class PgType:
    oid: int
    name: str
    typlen: int
    text: Encoder
    binary: Encoder
    array_oid: int = 0
    typmod: int = -1
    category: str = "U"


# --- text encoders -----------------------------------------------------------------------------


def _t_bool(v: Any) -> bytes:
    return b"t" if v else b"f"


def _t_int(v: Any) -> bytes:
    return str(int(v)).encode()


def float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    r = repr(float(v))
    if "e" in r or "n" in r:
        mant, _, exp = r.partition("e")
        return f"{mant.removesuffix('.0')}e{int(exp):+03d}"
    if r.endswith(".0"):
        r = r[:-2]
    # PostgreSQL switches to exponent form at 1e15 (DBL_DIG), Python at 1e16.
    if abs(v) >= 1e15:
        return float_text_exp(v)
    return r


def float_text_exp(v: float) -> str:
    r = f"{v:.17e}"
    mant, _, exp = r.partition("e")
    # Shortest mantissa that round-trips.
    for digits in range(1, 18):
        candidate = f"{v:.{digits - 1}e}"
        if float(candidate) == v:
            mant, _, exp = candidate.partition("e")
            break
    mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
    return f"{mant}e{int(exp):+03d}"


def _t_float(v: Any) -> bytes:
    return float_text(float(v)).encode()


def _t_float4(v: Any) -> bytes:
    """A ``real`` as PostgreSQL prints it: the shortest digits of its single-precision value."""
    return single_text(float(v), single=True).encode()


def _t_numeric(v: Any) -> bytes:
    if isinstance(v, Decimal):
        if v.is_nan():
            return b"NaN"
        return format(v, "f").encode()
    return str(v).encode()


def _t_str(v: Any) -> bytes:
    return str(v).encode()


def _t_bytes(v: Any) -> bytes:
    return b"\\x" + bytes(v).hex().encode()


def _t_date(v: Any) -> bytes:
    return str(v.isoformat()).encode()


def timestamp_text(v: dt.datetime) -> str:
    s = v.strftime("%Y-%m-%d %H:%M:%S") if v.year >= 1000 else v.isoformat(" ")[:19]
    if v.microsecond:
        s += f".{v.microsecond:06d}".rstrip("0")
    return s


def _t_timestamp(v: Any) -> bytes:
    return timestamp_text(v).encode()


def _t_timestamptz(v: Any) -> bytes:
    if v.tzinfo is not None:
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    return (timestamp_text(v) + "+00").encode()


def _t_time(v: Any) -> bytes:
    s = str(v.strftime("%H:%M:%S"))
    if v.microsecond:
        s += f".{v.microsecond:06d}".rstrip("0")
    return s.encode()


def _t_interval(v: Any) -> bytes:
    td: dt.timedelta = v
    days, secs, micros = td.days, td.seconds, td.microseconds
    hh, rem = divmod(secs, 3600)
    mm, ss = divmod(rem, 60)
    clock = f"{hh:02d}:{mm:02d}:{ss:02d}" + (f".{micros:06d}".rstrip("0") if micros else "")
    if days:
        return f"{days} day{'s' if abs(days) != 1 else ''} {clock}".encode()
    return clock.encode()


def _t_month_day_nano(v: Any) -> bytes:
    return Interval(v.months, v.days, v.nanoseconds // 1000).text().encode()


def _t_json(v: Any) -> bytes:
    return (v if isinstance(v, str) else json.dumps(v)).encode()


def _quote_array_item(s: str) -> str:
    if s == "" or s.upper() == "NULL" or any(c in s for c in ' {},"\\\t\n'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def _t_array(elem: Encoder) -> Encoder:
    def enc(v: Any) -> bytes:
        items = ["NULL" if x is None else _quote_array_item(elem(x).decode()) for x in v]
        return ("{" + ",".join(items) + "}").encode()

    return enc


# --- binary encoders ---------------------------------------------------------------------------

_B1: Final = struct.Struct("!?")
_B2: Final = struct.Struct("!h")
_B4: Final = struct.Struct("!i")
_B8: Final = struct.Struct("!q")
_F4: Final = struct.Struct("!f")
_F8: Final = struct.Struct("!d")
_U4: Final = struct.Struct("!I")


def _b_bool(v: Any) -> bytes:
    return _B1.pack(bool(v))


def _b_int2(v: Any) -> bytes:
    return _B2.pack(v)


def _b_int4(v: Any) -> bytes:
    return _B4.pack(v)


def _b_oid(v: Any) -> bytes:
    return _U4.pack(v)


def _b_int8(v: Any) -> bytes:
    return _B8.pack(v)


def _b_float4(v: Any) -> bytes:
    return _F4.pack(v)


def _b_float8(v: Any) -> bytes:
    return _F8.pack(v)


def _b_str(v: Any) -> bytes:
    return str(v).encode()


def _b_bytes(v: Any) -> bytes:
    return bytes(v)


def _b_jsonb(v: Any) -> bytes:
    return b"\x01" + _t_json(v)


def _b_date(v: Any) -> bytes:
    return _B4.pack((v - _EPOCH_DATE).days)


def _micros(td: dt.timedelta) -> int:
    return (td.days * 86400 + td.seconds) * 1_000_000 + td.microseconds


def _b_timestamp(v: Any) -> bytes:
    return _B8.pack(_micros(v - _EPOCH_TS))


def _b_timestamptz(v: Any) -> bytes:
    if v.tzinfo is None:
        v = v.replace(tzinfo=dt.UTC)
    return _B8.pack(_micros(v - _EPOCH_TSZ))


def _b_time(v: Any) -> bytes:
    return _B8.pack(((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond)


def _b_interval(v: Any) -> bytes:
    td: dt.timedelta = v
    return _B8.pack(td.seconds * 1_000_000 + td.microseconds) + _B4.pack(td.days) + _B4.pack(0)


def _b_month_day_nano(v: Any) -> bytes:
    return _B8.pack(v.nanoseconds // 1000) + _B4.pack(v.days) + _B4.pack(v.months)


def numeric_binary(v: Decimal | int) -> bytes:
    """PostgreSQL's numeric wire format: ndigits, weight, sign, dscale, base-10000 digits."""
    d = Decimal(v)
    if d.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(0, -exponent)
    ds = "".join(map(str, digits))
    # Pad the integer part to a multiple of 4 on the left, the fraction on the right.
    if exponent >= 0:
        int_part, frac_part = ds + "0" * exponent, ""
    else:
        int_part, frac_part = ds[:exponent] or "0", ds[exponent:].rjust(-exponent, "0")
    int_part = int_part.lstrip("0")
    int_groups = (len(int_part) + 3) // 4
    int_part = int_part.rjust(int_groups * 4, "0")
    frac_part = frac_part.ljust(((len(frac_part) + 3) // 4) * 4, "0")
    groups = [int(int_part[i : i + 4]) for i in range(0, len(int_part), 4)]
    groups += [int(frac_part[i : i + 4]) for i in range(0, len(frac_part), 4)]
    weight = int_groups - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    head = struct.pack("!hhHh", len(groups), weight, 0x4000 if sign else 0, dscale)
    return head + b"".join(_B2.pack(g) for g in groups)


def _b_numeric(v: Any) -> bytes:
    return numeric_binary(v)


def _b_array(elem: Encoder, elem_oid: int) -> Encoder:
    def enc(v: Any) -> bytes:
        items = list(v)
        has_null = any(x is None for x in items)
        head = _B4.pack(1 if items else 0) + _B4.pack(int(has_null)) + _U4.pack(elem_oid)
        if items:
            head += _B4.pack(len(items)) + _B4.pack(1)
        body = b"".join(
            b"\xff\xff\xff\xff" if x is None else _B4.pack(len(e := elem(x))) + e for x in items
        )
        return head + body

    return enc


# --- the table ---------------------------------------------------------------------------------

BOOL: Final = PgType(16, "bool", 1, _t_bool, _b_bool, 1000, category="B")
BYTEA: Final = PgType(17, "bytea", -1, _t_bytes, _b_bytes, 1001)
CHAR: Final = PgType(18, "char", 1, _t_str, _b_str, 1002, category="S")
NAME: Final = PgType(19, "name", 64, _t_str, _b_str, 1003, category="S")
INT8: Final = PgType(20, "int8", 8, _t_int, _b_int8, 1016, category="N")
INT2: Final = PgType(21, "int2", 2, _t_int, _b_int2, 1005, category="N")
INT4: Final = PgType(23, "int4", 4, _t_int, _b_int4, 1007, category="N")
TEXT: Final = PgType(25, "text", -1, _t_str, _b_str, 1009, category="S")
OID: Final = PgType(26, "oid", 4, _t_int, _b_oid, 1028, category="N")
JSON: Final = PgType(114, "json", -1, _t_json, _b_str, 199)
FLOAT4: Final = PgType(700, "float4", 4, _t_float4, _b_float4, 1021, category="N")
FLOAT8: Final = PgType(701, "float8", 8, _t_float, _b_float8, 1022, category="N")
VARCHAR: Final = PgType(1043, "varchar", -1, _t_str, _b_str, 1015, category="S")
DATE: Final = PgType(1082, "date", 4, _t_date, _b_date, 1182, category="D")
TIME: Final = PgType(1083, "time", 8, _t_time, _b_time, 1183, category="D")
TIMESTAMP: Final = PgType(1114, "timestamp", 8, _t_timestamp, _b_timestamp, 1115, category="D")
TIMESTAMPTZ: Final = PgType(
    1184, "timestamptz", 8, _t_timestamptz, _b_timestamptz, 1185, category="D"
)
INTERVAL: Final = PgType(1186, "interval", 16, _t_interval, _b_interval, 1187, category="T")
INTERVAL_MDN: Final = PgType(
    1186, "interval", 16, _t_month_day_nano, _b_month_day_nano, 1187, category="T"
)
"""spate's interval result columns (Arrow ``month_day_nano_interval``: months, days and
nanoseconds, whole microseconds), printed as PostgreSQL prints intervals."""
NUMERIC: Final = PgType(1700, "numeric", -1, _t_numeric, _b_numeric, 1231, category="N")
JSONB: Final = PgType(3802, "jsonb", -1, _t_json, _b_jsonb, 3807)
UNKNOWN: Final = PgType(705, "unknown", -2, _t_str, _b_str)

SCALARS: Final = (
    BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID, JSON, FLOAT4, FLOAT8, VARCHAR,
    DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, JSONB,
)  # fmt: skip
BY_OID: Final[dict[int, PgType]] = {t.oid: t for t in SCALARS}
BY_NAME: Final[dict[str, PgType]] = {t.name: t for t in SCALARS}


def array_of(elem: PgType) -> PgType:
    return PgType(
        elem.array_oid,
        "_" + elem.name,
        -1,
        _t_array(elem.text),
        _b_array(elem.binary, elem.oid),
        category="A",
    )


ARRAYS: Final[dict[int, PgType]] = {t.array_oid: array_of(t) for t in SCALARS}

CATALOG_TEXT: Final[dict[str, PgType]] = {
    name: PgType(oid, name, length, _t_str, _b_str, category=category)
    for name, oid, length, category in (
        ("int2vector", 22, -1, "A"), ("regproc", 24, 4, "N"), ("xid", 28, 4, "U"),
        ("oidvector", 30, -1, "A"), ("pg_node_tree", 194, -1, "Z"), ("aclitem", 1033, 12, "U"),
        ("anyarray", 2277, -1, "P"), ("_aclitem", 1034, -1, "A"), ("_text", 1009, -1, "A"),
        ("_int2", 1005, -1, "A"), ("_oid", 1028, -1, "A"), ("_char", 1002, -1, "A"),
        ("_float4", 1021, -1, "A"), ("_name", 1003, -1, "A"), ("_bool", 1000, -1, "A"),
        ("_int8", 1016, -1, "A"), ("_int4", 1007, -1, "A"),
    )
}  # fmt: skip
"""Catalog column types whose values spate holds as their PostgreSQL text form (``{a,b}``,
``1 2``): sent as that text."""


def _b_object_name(v: Any) -> bytes:
    raise PgError(
        "0A000",
        "the binary format of a regclass or regtype result (its object id) is not supported: "
        "spate sends its name, in the text format",
    )


CATALOG_TEXT.update(
    {
        name: PgType(oid, name, 4, _t_str, _b_object_name, category="N")
        for name, oid in (("regclass", 2205), ("regtype", 2206))
    }
)


def for_field(field: pa.Field) -> PgType:
    """The PostgreSQL type a column of ``field`` is sent as."""
    meta = field.metadata or {}
    if _META in meta:
        name = meta[_META].decode()
        if name in CATALOG_TEXT:
            return CATALOG_TEXT[name]
        if name.startswith("_"):
            return ARRAYS[BY_NAME[name[1:]].array_oid]
        return BY_NAME[name]
    if (spate_type := meta.get(b"spate.type")) == b"jsonb":
        return JSONB
    return for_arrow(field.type, spate_type)


def for_arrow(t: pa.DataType, spate_type: bytes | None = None) -> PgType:
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t):
        return INT2
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return INT4
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return INT8
    if pa.types.is_uint64(t) or pa.types.is_decimal(t):
        if pa.types.is_decimal(t):
            return PgType(
                NUMERIC.oid,
                NUMERIC.name,
                -1,
                _t_numeric,
                _b_numeric,
                NUMERIC.array_oid,
                typmod=((t.precision << 16) | t.scale) + 4,
                category="N",
            )
        return NUMERIC
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return FLOAT4
    if pa.types.is_floating(t):
        return FLOAT8
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return TEXT
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return BYTEA
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_time(t):
        return TIME
    if pa.types.is_timestamp(t):
        return TIMESTAMPTZ if t.tz is not None else TIMESTAMP
    if pa.types.is_duration(t):
        return INTERVAL
    if t == pa.month_day_nano_interval():
        return INTERVAL_MDN
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        elem = for_arrow(t.value_type)
        if elem.array_oid in ARRAYS:
            return ARRAYS[elem.array_oid]
        return ARRAYS[TEXT.array_oid]
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return JSONB
    if pa.types.is_null(t):
        return TEXT
    raise UsageError(f"the Arrow type {t} has no PostgreSQL type")


def field_with_type(name: str, pg: str, arrow: pa.DataType) -> pa.Field:
    """A field whose PostgreSQL type is ``pg`` (``oid``, ``name``, ``_text``…)."""
    return pa.field(name, arrow, metadata={_META: pg.encode()})


# --- parameter decoding ------------------------------------------------------------------------


def _d_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("t", "true", "yes", "on", "1", "y"):
        return True
    if v in ("f", "false", "no", "off", "0", "n"):
        return False
    raise ValueError(s)


def _d_bytea(s: str) -> bytes:
    if s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    return s.encode()


def _d_timestamp(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.strip())


def _d_timestamptz(s: str) -> dt.datetime:
    v = dt.datetime.fromisoformat(s.strip())
    return v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)


_TEXT_DECODERS: Final[dict[int, Callable[[str], Any]]] = {
    16: _d_bool,
    17: _d_bytea,
    20: int,
    21: int,
    23: int,
    26: int,
    700: float,
    701: float,
    1700: Decimal,
    1082: dt.date.fromisoformat,
    1114: _d_timestamp,
    1184: _d_timestamptz,
}


def _bin_numeric(b: bytes) -> Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHh", b)
    if sign == 0xC000:
        return Decimal("NaN")
    digits = struct.unpack_from(f"!{ndigits}h", b, 8)
    v = Decimal(0)
    for i, g in enumerate(digits):
        v += Decimal(g).scaleb(4 * (weight - i))
    v = v.quantize(Decimal(1).scaleb(-dscale)) if dscale else v.quantize(Decimal(1))
    return -v if sign == 0x4000 else v


def _bin_timestamp(b: bytes) -> dt.datetime:
    return _EPOCH_TS + dt.timedelta(microseconds=_B8.unpack(b)[0])


def _bin_timestamptz(b: bytes) -> dt.datetime:
    return _EPOCH_TSZ + dt.timedelta(microseconds=_B8.unpack(b)[0])


_BINARY_DECODERS: Final[dict[int, Decoder]] = {
    16: lambda b: _B1.unpack(b)[0],
    17: bytes,
    20: lambda b: _B8.unpack(b)[0],
    21: lambda b: _B2.unpack(b)[0],
    23: lambda b: _B4.unpack(b)[0],
    26: lambda b: _U4.unpack(b)[0],
    700: lambda b: _F4.unpack(b)[0],
    701: lambda b: _F8.unpack(b)[0],
    1700: _bin_numeric,
    1082: lambda b: _EPOCH_DATE + dt.timedelta(days=_B4.unpack(b)[0]),
    1114: _bin_timestamp,
    1184: _bin_timestamptz,
    3802: lambda b: b[1:].decode() if b[:1] == b"\x01" else b.decode(),
    1186: lambda b: _bin_interval(b),
}


def _bin_interval(b: bytes) -> Interval:
    micros, days, months = struct.unpack("!qii", b)
    return Interval(months, days, micros)


def decode_param(oid: int, fmt: int, raw: bytes | None, index: int) -> Any:
    """The Python value of bound parameter ``$index`` (NULL is ``None``)."""
    if raw is None:
        return None
    try:
        if fmt == 1:
            dec = _BINARY_DECODERS.get(oid)
            return dec(raw) if dec is not None else raw.decode()
        text = raw.decode()
        tdec = _TEXT_DECODERS.get(oid)
        return tdec(text) if tdec is not None else text
    except (ValueError, struct.error, UnicodeDecodeError, InvalidOperation, OverflowError) as e:
        name = BY_OID[oid].name if oid in BY_OID else f"type {oid}"
        raise InvalidParameter(f"parameter ${index} is not a valid {name}: {e}") from None


def text_decoder(oid: int) -> Callable[[str], Any] | None:
    """How a value of type ``oid`` in text format becomes its Python value (``None``: the
    text is the value)."""
    return _TEXT_DECODERS.get(oid)


def binary_decoder(oid: int) -> Decoder:
    """How a value of type ``oid`` in binary format becomes its Python value (a type without
    a binary decoder is read as UTF-8 text, as ``text`` and ``varchar`` are)."""
    dec = _BINARY_DECODERS.get(oid)
    if dec is not None:
        return dec
    return lambda b: b.decode()
