"""PostgreSQL types on spate's types.

The binder tracks the PostgreSQL type of every expression (:class:`PgType`), because it decides
result types, implicit conversions and errors, and maps it onto a spate
:class:`~spate.repr.types.ScalarType` (:attr:`PgType.scalar`):

=========================================  ==========================  ==========================
PostgreSQL                                 spate                       note
=========================================  ==========================  ==========================
smallint, integer, bigint                  int64                       int2/int4 results checked
                                                                       (checks.int_range)
numeric(p,s)                               numeric(p,s)                p <= 38
numeric                                    numeric(38,10)              fixed column scale
real, double precision                     float64                     real rounded to single
                                                                       precision
text, varchar(n), char varying             text
boolean, date, timestamp, jsonb, bytea     bool, date, timestamp,
                                           jsonb, bytes
timestamptz                                timestamp                   UTC wall clock
interval                                   interval                    months, days,
                                                                       microseconds; constants
                                                                       also in milliseconds
                                                                       for time arithmetic
=========================================  ==========================  ==========================

Result columns of ``smallint``, ``integer`` and ``real`` are Arrow int16, int32 and float32
(:mod:`spate.sql.results`).

Implicit conversions and the common type of UNION, CASE, COALESCE, VALUES… follow PostgreSQL's
algorithm (type categories, preferred types): :func:`common_type`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    INTERVAL,
    JSONB,
    TEXT,
    TIMESTAMP,
    ScalarKind,
    ScalarType,
    numeric,
)

DEFAULT_NUMERIC: Final = numeric(38, 10)
"""What an unconstrained ``numeric`` column is stored as."""


@dataclass(frozen=True, slots=True)
class PgType:
    """A PostgreSQL type: its name (``int4``, ``numeric``…) and spate type (``None``: none)."""

    name: str
    scalar: ScalarType | None

    def __str__(self) -> str:
        return display_name(self)

    @property
    def category(self) -> str:
        return _CATEGORY[self.name]

    @property
    def is_numeric(self) -> bool:
        return self.category == "N"

    @property
    def is_integer(self) -> bool:
        return self.name in ("int2", "int4", "int8")


INT2: Final = PgType("int2", INT64)
INT4: Final = PgType("int4", INT64)
INT8: Final = PgType("int8", INT64)
FLOAT4: Final = PgType("float4", FLOAT64)
FLOAT8: Final = PgType("float8", FLOAT64)
PG_TEXT: Final = PgType("text", TEXT)
PG_BOOL: Final = PgType("bool", BOOL)
PG_DATE: Final = PgType("date", DATE)
PG_TIMESTAMP: Final = PgType("timestamp", TIMESTAMP)
PG_TIMESTAMPTZ: Final = PgType("timestamptz", TIMESTAMP)
PG_INTERVAL: Final = PgType("interval", None)
PG_INTERVAL_VALUE: Final = PgType("interval", INTERVAL)
"""An interval value (a column, or computed: :mod:`spate.sql.interval_ops`); ``PG_INTERVAL``
is a constant or ``timestamp - timestamp`` also known in milliseconds."""
PG_JSONB: Final = PgType("jsonb", JSONB)
PG_BYTEA: Final = PgType("bytea", BYTES)
UNKNOWN: Final = PgType("unknown", None)
"""A quoted literal or NULL whose type the context decides."""


def pg_numeric(scalar: ScalarType) -> PgType:
    return PgType("numeric", scalar)


_CATEGORY: Final[dict[str, str]] = {
    "int2": "N",
    "int4": "N",
    "int8": "N",
    "numeric": "N",
    "float4": "N",
    "float8": "N",
    "text": "S",
    "bool": "B",
    "date": "D",
    "timestamp": "D",
    "timestamptz": "D",
    "interval": "T",
    "jsonb": "U",
    "bytea": "U",
    "unknown": "X",
}
_PREFERRED: Final = frozenset({"float8", "text", "bool", "timestamptz", "interval"})
_NUMERIC_RANK: Final[dict[str, int]] = {
    "int2": 0,
    "int4": 1,
    "int8": 2,
    "numeric": 3,
    "float4": 4,
    "float8": 5,
}
_DISPLAY: Final[dict[str, str]] = {
    "int2": "smallint",
    "int4": "integer",
    "int8": "bigint",
    "float4": "real",
    "float8": "double precision",
    "bool": "boolean",
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
}


def display_name(t: PgType) -> str:
    """The name PostgreSQL's messages use (``integer``, ``double precision``…)."""
    if t.name == "numeric" and t.scalar is not None and t.scalar != DEFAULT_NUMERIC:
        return f"numeric({t.scalar.precision},{t.scalar.scale})"
    return _DISPLAY.get(t.name, t.name)


def from_scalar(t: ScalarType) -> PgType:
    """The PostgreSQL type a spate column of type ``t`` is seen as."""
    k = t.kind
    if k is ScalarKind.INT64:
        return INT8
    if k is ScalarKind.NUMERIC:
        return pg_numeric(t)
    return {
        ScalarKind.BOOL: PG_BOOL,
        ScalarKind.FLOAT64: FLOAT8,
        ScalarKind.TEXT: PG_TEXT,
        ScalarKind.BYTES: PG_BYTEA,
        ScalarKind.DATE: PG_DATE,
        ScalarKind.TIMESTAMP: PG_TIMESTAMP,
        ScalarKind.JSONB: PG_JSONB,
        ScalarKind.INTERVAL: PG_INTERVAL_VALUE,
    }[k]


def can_implicit(src: PgType, dst: PgType) -> bool:
    """Whether PostgreSQL converts ``src`` to ``dst`` implicitly."""
    if src.name == dst.name or src.name == "unknown":
        return True
    if src.category == "S" and dst.category == "S":
        return True  # text, name, "char", varchar (catalog identifiers compare as text)
    if src.is_numeric and dst.is_numeric:
        return _NUMERIC_RANK[src.name] <= _NUMERIC_RANK[dst.name]
    if src.name == "date" and dst.name in ("timestamp", "timestamptz"):
        return True
    return src.name == "timestamp" and dst.name == "timestamptz"


def wider_numeric(a: ScalarType, b: ScalarType) -> ScalarType:
    """The numeric type holding both numeric types' values."""
    assert a.scale is not None and b.scale is not None
    assert a.precision is not None and b.precision is not None
    scale = max(a.scale, b.scale)
    integral = max(a.precision - a.scale, b.precision - b.scale)
    return numeric(min(38, integral + scale), scale)


def common_type(types: list[PgType]) -> PgType | None:
    """PostgreSQL's common type of UNION/CASE/COALESCE/VALUES branches (``None``: mismatch).

    All unknown: text. Otherwise the non-unknown types must share a category; the candidate is
    the first type, replaced by a later one it converts to implicitly (but not back), until a
    preferred type is chosen; every type must then convert to it implicitly.
    """
    known = [t for t in types if t.name != "unknown"]
    if not known:
        return PG_TEXT
    category = known[0].category
    if any(t.category != category for t in known):
        return None
    pick = known[0]
    if category == "S" and any(t.name == "text" for t in known):
        pick = PG_TEXT  # text with name/"char"/varchar (catalog identifiers): text
    for t in known[1:]:
        if pick.name in _PREFERRED:
            break
        if can_implicit(pick, t) and not can_implicit(t, pick):
            pick = t
    if not all(can_implicit(t, pick) for t in known):
        return None
    if pick.name == "interval":
        return PG_INTERVAL_VALUE
    if pick.name == "numeric":
        scalars = [t.scalar for t in known if t.name == "numeric" and t.scalar is not None]
        s = scalars[0]
        for other in scalars[1:]:
            s = wider_numeric(s, other)
        if any(t.is_integer for t in known):
            assert s.scale is not None and s.precision is not None
            s = numeric(min(38, max(s.precision, 19 + s.scale)), s.scale)
        pick = pg_numeric(s)
    return pick


# --- type names ------------------------------------------------------------------------------

_NAMED: Final[dict[str, PgType]] = {
    "smallint": INT2,
    "int2": INT2,
    "integer": INT4,
    "int": INT4,
    "int4": INT4,
    "bigint": INT8,
    "int8": INT8,
    "long": INT8,
    "real": FLOAT4,
    "float4": FLOAT4,
    "float": FLOAT8,
    "double precision": FLOAT8,
    "double": FLOAT8,
    "float8": FLOAT8,
    "text": PG_TEXT,
    "string": PG_TEXT,
    "varchar": PG_TEXT,
    "character varying": PG_TEXT,
    "boolean": PG_BOOL,
    "bool": PG_BOOL,
    "date": PG_DATE,
    "timestamp": PG_TIMESTAMP,
    "timestamp without time zone": PG_TIMESTAMP,
    "timestamp_ntz": PG_TIMESTAMP,
    "timestamptz": PG_TIMESTAMPTZ,
    "timestamp with time zone": PG_TIMESTAMPTZ,
    "interval": PG_INTERVAL,
    "jsonb": PG_JSONB,
    "json": PG_JSONB,
    "bytea": PG_BYTEA,
    "binary": PG_BYTEA,
}


def named_type(name: str, precision: int | None = None, scale: int | None = None) -> PgType:
    """The type called ``name`` (lower case) with optional modifiers; ``KeyError`` if unknown."""
    if name in ("numeric", "decimal"):
        if precision is None:
            return pg_numeric(DEFAULT_NUMERIC)
        return pg_numeric(numeric(precision, scale or 0))
    return _NAMED[name]


# --- the types of the catalog relations ------------------------------------------------------
# pg_catalog and information_schema columns have PostgreSQL types spate does not store: object
# ids (``oid``, int64 values), identifiers (``name``, ``"char"``, ``varchar``: text values) and
# the array and opaque types (``int2vector``, ``_text``, ``aclitem``…: their PostgreSQL text
# form, as text values). They keep their names (a client sees a ``name`` column as ``name``);
# object ids are numbers and identifiers are strings for comparisons and conversions.

PG_OID: Final = PgType("oid", INT64)
PG_NAME: Final = PgType("name", TEXT)
PG_CHAR: Final = PgType("char", TEXT)
PG_VARCHAR: Final = PgType("varchar", TEXT)
PG_NAME_ARRAY: Final = PgType("_name", TEXT)
ARRAY_PREFIX: Final = "spate_catalog_array_"
"""``CAST(x AS spate_catalog_array_text)``: a catalog array (its text form) typed ``text[]``."""
_TEXT_LIKE: Final = ("name", "char", "varchar", "regproc", "regclass", "regtype", "pg_node_tree")
_OPAQUE: Final = (
    "xid", "aclitem", "int2vector", "oidvector", "anyarray", "_aclitem", "_text", "_int2",
    "_oid", "_char", "_float4", "_name", "_bool", "_int8", "_int4",
)  # fmt: skip
CATALOG_TYPES: Final[dict[str, PgType]] = {
    "oid": PG_OID,
    **{n: PgType(n, TEXT) for n in _TEXT_LIKE},
    **{n: PgType(n, INT64 if n == "xid" else TEXT) for n in _OPAQUE},
}
"""The PostgreSQL types of catalog columns beyond spate's own, by name."""
_CATEGORY.update({"oid": "N", **dict.fromkeys(_TEXT_LIKE, "S"), **dict.fromkeys(_OPAQUE, "A")})
_CATEGORY["xid"] = "U"
_CATEGORY["aclitem"] = "U"
_NUMERIC_RANK["oid"] = 2
_NAMED.update({"oid": PG_OID, "name": PG_NAME})
# a displayed cast to regclass or regtype (spate.sql.catalog_functions): the object's name
_NAMED.update({n: CATALOG_TYPES[n] for n in ("regclass", "regtype")})
# the catalog's arrays in the casts spate.sql.catalog_functions writes (not column types)
_NAMED.update(
    {
        f"{ARRAY_PREFIX}{n}": CATALOG_TYPES[f"_{n}"]
        for n in ("name", "text", "bool", "int8", "int4", "int2")
    }
)


def catalog_type(name: str) -> PgType | None:
    """The catalog column type called ``name`` (``oid``, ``name``, ``_text``…), if it is one."""
    return CATALOG_TYPES.get(name)
