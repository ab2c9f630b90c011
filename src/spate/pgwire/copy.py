"""``COPY t [(col, …)] FROM STDIN``: the copy-in sub-protocol and the data formats.

The statement comes typed from the SQL layer (:class:`spate.sql.copy_statement.CopyFrom`:
the table, the columns, the format and its options); nothing here reads SQL. The session
answers CopyInResponse; the client's CopyData messages are
parsed as they come (text: tab-separated with PostgreSQL's backslash escapes and ``\\N``;
csv: PostgreSQL's quoting, an unquoted NULL string is NULL; binary: the ``PGCOPY`` file
format), each field decoded as its column's type. A COPY is atomic: nothing is written until
CopyDone, and then every row goes to the table in one write (the engine's ``copy_in``, which
is the INSERT path: constraints checked, buffered inside a transaction block). A bad value,
a CopyFail from the client, or a constraint violation writes nothing.

Errors are PostgreSQL's: ``22P04`` malformed data (missing or extra columns, an unterminated
quote), ``22P02`` a value that is not of its column's type, ``22P03`` malformed binary data,
``57014`` CopyFail; a violated constraint keeps its own (``23502``, ``23505``…).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Final

import pyarrow as pa

from spate.errors import EvalError
from spate.pgwire import codec
from spate.pgwire import types as pgt
from spate.pgwire.errors import PgError
from spate.pgwire.host import SessionHost
from spate.repr.interval_text import parse_interval
from spate.sql.copy_statement import CopyFrom, CopyOptions

BAD_COPY_DATA: Final = "22P04"
INVALID_TEXT: Final = "22P02"
INVALID_BINARY: Final = "22P03"
INVALID_DATETIME: Final = "22007"
_DATETIMES: Final = frozenset({1082, 1114, 1184, 1186})
_I16: Final = struct.Struct("!h")
_I32: Final = struct.Struct("!i")


# --- the data formats ---------------------------------------------------------------------------

Field = bytes | None


class _LineReader:
    """What the text and the CSV format share: the options of lines, their count, the header
    line and the end marker."""

    def __init__(self, stmt: CopyOptions) -> None:
        self._delim = stmt.delimiter.encode()
        self._null = stmt.null.encode()
        self._header = stmt.header
        self._buf = b""
        self.line = 0
        self.ended = False

    def _data_line(self, line: bytes) -> bytes | None:
        """``line`` (counted) without its CR; ``None`` for the end marker ``\\.`` (then
        ``ended``) and for the header line (skipped)."""
        self.line += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        if line == b"\\.":
            self.ended = True
            return None
        if self._header:
            self._header = False
            return None
        return line


class TextReader(_LineReader):
    """PostgreSQL's text format: one row a line, fields split at the delimiter, backslash
    escapes; a field that is the NULL string (before unescaping) is NULL."""

    def __init__(self, stmt: CopyOptions) -> None:
        super().__init__(stmt)
        self._flat = b"\\" in self._null  # a block without backslashes has no NULL

    def feed(self, data: bytes, out: Columns) -> None:
        buf = self._buf + data if self._buf else data
        end = buf.rfind(b"\n")
        if end < 0:
            self._buf = buf
            return
        self._buf = buf[end + 1 :]
        self._block(buf[:end], out)

    def finish(self, out: Columns) -> None:
        rest, self._buf = self._buf, b""
        if rest:
            self._block(rest, out)

    def _block(self, block: bytes, out: Columns) -> None:
        """Whole lines: split at once when they have no escapes, no NULL, no end marker and
        each the right number of fields (the usual case); else line by line."""
        plain = b"\\" not in block and b"\r" not in block
        if plain and self._flat and not self._header and not self.ended:
            lines = block.count(b"\n") + 1
            flat = block.replace(b"\n", self._delim).split(self._delim)
            if len(flat) == lines * out.width:
                self.line += lines
                out.add_flat(flat, lines)
                return
        out.add(self._lines(block.split(b"\n")))

    def _lines(self, lines: list[bytes]) -> Iterator[list[Field]]:
        delim, null = self._delim, self._null
        for raw in lines:
            if self.ended:
                return
            line = self._data_line(raw)
            if line is None:
                continue
            if b"\\" not in line:
                yield [None if f == null else f for f in line.split(delim)]
            else:
                yield _split_escaped(line, delim, null)


_SIMPLE: Final = {ord("b"): 8, ord("f"): 12, ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("v"): 11}
_OCTAL: Final = frozenset(b"01234567")
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")


def _split_escaped(line: bytes, delim: bytes, null: bytes) -> list[Field]:
    """A text-format line with backslashes: split at unescaped delimiters, then unescape."""
    raws: list[bytes] = []
    start = i = 0
    n = len(line)
    d = delim[0]
    while i < n:
        c = line[i]
        if c == 0x5C:  # backslash: the next byte is part of this field
            i += 2
            continue
        if c == d:
            raws.append(line[start:i])
            start = i + 1
        i += 1
    raws.append(line[start:])
    return [None if r == null else _unescape(r) for r in raws]


def _unescape(raw: bytes) -> bytes:
    if b"\\" not in raw:
        return raw
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c != 0x5C or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = raw[i + 1]
        if e in _OCTAL:
            j = i + 1
            while j < n and j < i + 4 and raw[j] in _OCTAL:
                j += 1
            out.append(int(raw[i + 1 : j], 8) & 0xFF)
            i = j
        elif e == ord("x") and i + 2 < n and raw[i + 2] in _HEX:
            j = i + 2
            while j < n and j < i + 4 and raw[j] in _HEX:
                j += 1
            out.append(int(raw[i + 2 : j], 16))
            i = j
        else:
            out.append(_SIMPLE.get(e, e))
            i += 2
    return bytes(out)


class CsvReader(_LineReader):
    """PostgreSQL's CSV format: a quoted field may hold delimiters, quotes (doubled, or after
    the escape character) and newlines; an unquoted field equal to the NULL string is NULL, a
    quoted one never is, but in the ``force_not_null`` fields (the positions of the given
    columns) an unquoted one is not, in the ``force_null`` fields a quoted one is."""

    def __init__(
        self,
        stmt: CopyOptions,
        *,
        force_not_null: frozenset[int] = frozenset(),
        force_null: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__(stmt)
        self._quote = stmt.quote.encode()
        self._escape = stmt.escape.encode()
        self._force_not_null = force_not_null
        self._force_null = force_null
        self._forced = bool(force_not_null or force_null)

    def feed(self, data: bytes, out: Columns) -> None:
        out.add(self._feed(data))

    def finish(self, out: Columns) -> None:
        out.add(self._finish())

    def _feed(self, data: bytes) -> Iterator[list[Field]]:
        buf = self._buf + data if self._buf else data
        end = buf.rfind(b"\n")
        if end < 0:
            self._buf = buf
            return
        self._buf = buf[end + 1 :]
        yield from self._records(buf[: end + 1], final=False)

    def _finish(self) -> Iterator[list[Field]]:
        rest, self._buf = self._buf, b""
        if rest:
            yield from self._records(rest + b"\n", final=True)

    def _records(self, text: bytes, *, final: bool) -> Iterator[list[Field]]:
        """The records of ``text`` (whole lines); a record left open at its end (a newline in
        quotes) is kept for the next data, or is an error at the end."""
        pos, n = 0, len(text)
        delim, null, quote = self._delim, self._null, self._quote
        while pos < n and not self.ended:
            nl = text.find(b"\n", pos)
            line = text[pos:nl]
            if quote not in line:
                pos = nl + 1
                data = self._data_line(line)
                if data is not None and self._forced:
                    yield [self._value(f, False, k) for k, f in enumerate(data.split(delim))]
                elif data is not None:
                    yield [None if f == null else f for f in data.split(delim)]
                continue
            parsed = self._quoted(text, pos)
            if parsed is None:
                if final:
                    raise PgError(BAD_COPY_DATA, "unterminated CSV quoted field")
                self._buf = text[pos:] + self._buf
                return
            fields, pos, lines = parsed
            self.line += lines
            if self._header:
                self._header = False
                continue
            yield fields

    def _quoted(self, text: bytes, pos: int) -> tuple[list[Field], int, int] | None:
        """The record at ``pos`` (which has quotes): its fields, where the next one starts and
        how many lines it spans; ``None`` if it does not end within ``text``."""
        d, q, e = self._delim[0], self._quote[0], self._escape[0]
        fields: list[Field] = []
        field = bytearray()
        quoted = in_quotes = False
        lines = 1
        i, n = pos, len(text)
        while i < n:
            c = text[i]
            if in_quotes:
                if c == e and i + 1 < n and text[i + 1] in (q, e) and (e != q or text[i + 1] == q):
                    field.append(text[i + 1])
                    i += 2
                    continue
                if c == q:
                    in_quotes = False
                else:
                    if c == 0x0A:
                        lines += 1
                    field.append(c)
                i += 1
                continue
            if c == q:
                in_quotes = quoted = True
            elif c == d:
                fields.append(self._value(bytes(field), quoted, len(fields)))
                field.clear()
                quoted = False
            elif c == 0x0A:
                if field.endswith(b"\r") and not quoted:
                    del field[-1]
                fields.append(self._value(bytes(field), quoted, len(fields)))
                return fields, i + 1, lines
            else:
                field.append(c)
            i += 1
        return None

    def _value(self, raw: bytes, quoted: bool, k: int) -> Field:
        if raw != self._null:
            return raw
        if quoted:
            return None if k in self._force_null else raw
        return raw if k in self._force_not_null else None


class BinaryReader:
    """PostgreSQL's binary COPY format: the ``PGCOPY`` signature, flags and a header
    extension, then per row a 16-bit field count and per field a 32-bit length (-1: NULL) and
    the value in its type's binary format; a field count of -1 ends the data."""

    def __init__(self, stmt: CopyOptions) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._header_done = False
        self.line = 0
        self.ended = False

    def feed(self, data: bytes, out: Columns) -> None:
        out.add(self._feed(data))

    def finish(self, out: Columns) -> None:
        if not self.ended:
            raise PgError(INVALID_BINARY, "unexpected EOF in COPY data (no file trailer)")

    def _feed(self, data: bytes) -> Iterator[list[Field]]:
        self._buf += data
        yield from self._rows()
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0

    def _rows(self) -> Iterator[list[Field]]:
        buf = self._buf
        if not self._header_done:
            if len(buf) < 19:
                return
            if bytes(buf[:11]) != codec.COPY_SIGNATURE:
                raise PgError(INVALID_BINARY, "COPY file signature not recognized")
            (ext,) = _I32.unpack_from(buf, 15)
            if ext < 0:
                raise PgError(INVALID_BINARY, "invalid COPY file header (wrong length)")
            if len(buf) < 19 + ext:
                return
            self._pos = 19 + ext
            self._header_done = True
        n = len(buf)
        while not self.ended:
            pos = self._pos
            if pos + 2 > n:
                return
            (count,) = _I16.unpack_from(buf, pos)
            if count == -1:
                self.ended = True
                self._pos = n  # what follows the trailer is ignored
                return
            if count < 0:
                raise PgError(INVALID_BINARY, f"invalid field count {count} in COPY data")
            pos += 2
            fields: list[Field] = []
            for _ in range(count):
                if pos + 4 > n:
                    return
                (size,) = _I32.unpack_from(buf, pos)
                pos += 4
                if size == -1:
                    fields.append(None)
                    continue
                if size < 0:
                    raise PgError(INVALID_BINARY, f"invalid field size {size}")
                if pos + size > n:
                    return
                fields.append(bytes(buf[pos : pos + size]))
                pos += size
            self._pos = pos
            self.line += 1
            yield fields


Reader = TextReader | CsvReader | BinaryReader


def reader(stmt: CopyFrom, t: Target) -> Reader:
    """The reader of ``stmt``'s format, into the given columns of ``t``."""
    opts = stmt.options
    if opts.format == "csv":
        given = [t.names[i] for i in t.given]
        return CsvReader(
            opts,
            force_not_null=_positions("FORCE_NOT_NULL", opts.force_not_null, given),
            force_null=_positions("FORCE_NULL", opts.force_null, given),
        )
    if opts.format == "binary":
        return BinaryReader(opts)
    return TextReader(opts)


def _positions(option: str, names: tuple[str, ...], given: list[str]) -> frozenset[int]:
    for name in names:
        if name not in given:
            raise PgError("42P10", f'{option} column "{name}" not referenced by COPY')
    return frozenset(given.index(n) for n in names)


# --- values -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """Where the rows go: the table, its columns (name and PostgreSQL type) in order, and the
    positions of the columns the COPY gives, in the order it gives them."""

    table: str
    names: tuple[str, ...]
    types: tuple[pgt.PgType, ...]
    given: tuple[int, ...]
    arrow: tuple[pa.DataType, ...] = ()


def target(stmt: CopyFrom, schema: pa.Schema) -> Target:
    names = tuple(schema.names)
    types = tuple(pgt.for_field(f) for f in schema)
    arrow = tuple(f.type for f in schema)
    if stmt.columns is None:
        return Target(stmt.table, names, types, tuple(range(len(names))), arrow)
    given = []
    for c in stmt.columns:
        if c not in names:
            raise PgError("42703", f'column "{c}" of relation "{stmt.table}" does not exist')
        if names.index(c) in given:
            raise PgError("42701", f'column "{c}" specified more than once')
        given.append(names.index(c))
    return Target(stmt.table, names, types, tuple(given), arrow)


def converters(t: Target, fmt: str) -> list[Callable[[bytes], Any]]:
    """For each given column, its field's bytes as a value of the column's type."""
    out: list[Callable[[bytes], Any]] = []
    for i in t.given:
        oid = t.types[i].oid
        conv: Callable[[bytes], Any]
        if fmt == "binary":
            conv = pgt.binary_decoder(oid)
        else:
            dec = pgt.text_decoder(oid)
            if oid in _INT_RANGES:
                conv = _ranged(*_INT_RANGES[oid])
            elif oid == pgt.INTERVAL.oid:
                conv = _text(parse_interval)
            else:
                conv = _text(dec) if dec is not None else _utf8
        typ = t.arrow[i] if t.arrow else None
        if oid == 1114 and fmt != "binary":
            conv = _naive_utc(conv)
        if isinstance(typ, pa.Decimal128Type | pa.Decimal256Type):
            conv = _rounded(conv, typ.precision, typ.scale)
        out.append(conv)
    return out


def _naive_utc(conv: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """A timestamp with an offset (a client's ``timestamptz`` text, for a column spate keeps
    as a timestamp in UTC) as the UTC time it is."""

    def dec(b: bytes) -> Any:
        v = conv(b)
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v

    return dec


def _rounded(conv: Callable[[bytes], Any], precision: int, scale: int) -> Callable[[bytes], Any]:
    """A numeric(p,s) value rounded to its scale (half away from zero), as PostgreSQL does;
    one with too many digits before the point is ``22003``."""
    unit = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** (precision - scale)

    def dec(b: bytes) -> Any:
        v = conv(b)
        if isinstance(v, Decimal) and v.is_finite():
            v = v.quantize(unit, rounding=ROUND_HALF_UP)
            if abs(v) >= limit:
                raise OutOfRange(v)
        return v

    return dec


_INT_RANGES: Final = {21: (-(2**15), 2**15 - 1), 23: (-(2**31), 2**31 - 1)}


class OutOfRange(OverflowError):
    """An integer beyond its column's type (``22003``)."""


def _ranged(lo: int, hi: int) -> Callable[[bytes], int]:
    def dec(b: bytes) -> int:
        v = int(b)
        if not lo <= v <= hi:
            raise OutOfRange(v)
        return v

    return dec


def _utf8(b: bytes) -> str:
    return b.decode()


def _text(dec: Callable[[str], Any]) -> Callable[[bytes], Any]:
    return lambda b: dec(b.decode())


_DECODE_ERRORS: Final = (
    ValueError,
    struct.error,
    InvalidOperation,
    OverflowError,
    TypeError,
    EvalError,
)


SPILL_ROWS: Final = 16384


class Columns:
    """The fields read so far, column by column: the latest in a list per given column, the
    earlier ones moved to Arrow binary arrays every :data:`SPILL_ROWS` rows (a few bytes a
    field instead of a Python object each)."""

    def __init__(self, t: Target) -> None:
        self.target = t
        self.width = len(t.given)
        self.data: list[list[Field]] = [[] for _ in t.given]
        self.chunks: list[list[pa.Array]] = [[] for _ in t.given]
        self.count = 0

    def _maybe_spill(self) -> None:
        if self.data and len(self.data[0]) >= SPILL_ROWS:
            self._spill()

    def _spill(self) -> None:
        for j, column in enumerate(self.data):
            if column:
                self.chunks[j].append(pa.array(column, pa.binary()))
                self.data[j] = []

    def arrays(self) -> list[pa.ChunkedArray]:
        """Every column's fields (NULL for a NULL field)."""
        self._spill()
        return [pa.chunked_array(c, pa.binary()) for c in self.chunks]

    def add(self, lines: Iterator[list[Field]]) -> None:
        """Lines' fields, each line checked to have one per given column (``22P04``)."""
        k, data, t = self.width, self.data, self.target
        for f in lines:
            if len(f) != k:
                if len(f) < k:
                    col = t.names[t.given[len(f)]]
                    raise PgError(BAD_COPY_DATA, f'missing data for column "{col}"')
                raise PgError(BAD_COPY_DATA, "extra data after last expected column")
            for column, v in zip(data, f, strict=True):
                column.append(v)
            self.count += 1
        self._maybe_spill()

    def add_flat(self, flat: list[bytes], lines: int) -> None:
        """``lines`` lines' fields, one after the other."""
        for j, column in enumerate(self.data):
            column.extend(flat[j :: self.width])
        self.count += lines
        self._maybe_spill()


def rows(t: Target, cols: Columns, fmt: str) -> list[tuple[Any, ...]]:
    """Every row of the table: the given columns decoded, the others NULL."""
    convs = converters(t, fmt)
    width, given = len(t.names), t.given
    full = given == tuple(range(width))
    out: list[tuple[Any, ...]] = []
    columns = [a.to_pylist() for a in cols.arrays()]
    for line, f in enumerate(zip(*columns, strict=True), 1):
        try:
            values = [None if v is None else c(v) for c, v in zip(convs, f, strict=True)]
        except _DECODE_ERRORS:
            raise _bad_value(t, list(f), convs, fmt, line) from None
        if full:
            out.append(tuple(values))
        else:
            row: list[Any] = [None] * width
            for i, v in zip(given, values, strict=True):
                row[i] = v
            out.append(tuple(row))
    return out


_ARROW_CASTS: Final = frozenset({20, 21, 23, 25, 700, 701, 1043})
"""Types whose text form Arrow's cast from a string reads as PostgreSQL does (a value it does
not read sends the whole COPY down the row path, which decodes each value itself)."""


def columnar(t: Target, schema: pa.Schema, cols: Columns) -> pa.Table | None:
    """The rows of a text or CSV COPY as an Arrow table of ``schema``, cast by Arrow; ``None``
    when a column is of another type or a value does not cast (then :func:`rows`)."""
    if any(t.types[i].oid not in _ARROW_CASTS for i in t.given):
        return None
    n = cols.count
    arrays: dict[int, pa.Array | pa.ChunkedArray] = {}
    try:
        for raw, i in zip(cols.arrays(), t.given, strict=True):
            text = raw.cast(pa.string())
            arrays[i] = text.cast(schema.field(i).type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    plain = pa.schema([pa.field(f.name, f.type, f.nullable) for f in schema])
    return pa.Table.from_arrays(
        [arrays.get(i, pa.nulls(n, f.type)) for i, f in enumerate(plain)], schema=plain
    )


def _bad_value(
    t: Target, f: list[Field], convs: list[Callable[[bytes], Any]], fmt: str, line: int
) -> PgError:
    for i, (c, v) in enumerate(zip(convs, f, strict=True)):
        if v is None:
            continue
        try:
            c(v)
        except OutOfRange:
            col = t.given[i]
            shown = v.decode(errors="replace")
            if t.types[col].oid == 1700:
                return PgError("22003", "numeric field overflow")
            return PgError("22003", f'value "{shown}" is out of range for type {t.types[col].name}')
        except _DECODE_ERRORS as exc:
            col = t.given[i]
            typ = t.types[col].name
            if isinstance(exc, EvalError) and fmt != "binary":  # its own code and text
                return PgError(exc.sqlstate, str(exc))
            if fmt == "binary":
                e = PgError(INVALID_BINARY, f"incorrect binary data format in column {col + 1}")
            else:
                shown = v.decode(errors="replace")
                code = INVALID_DATETIME if t.types[col].oid in _DATETIMES else INVALID_TEXT
                e = PgError(code, f'invalid input syntax for type {typ}: "{shown}"')
            return e
    return PgError(INVALID_TEXT, f"invalid input in COPY data, line {line}")


# --- the sub-protocol ---------------------------------------------------------------------------


async def copy_in(s: SessionHost, stmt: CopyFrom) -> None:
    """Answer CopyInResponse, read the client's data to CopyDone, write every row at once."""
    schema = await s.engine_call(lambda engine, ctx: _copy_schema(engine, stmt.table, ctx))
    t = target(stmt, schema)
    r = reader(stmt, t)  # its options checked against the columns before CopyInResponse
    fmt = 1 if stmt.options.format == "binary" else 0
    s.send(codec.copy_in_response(len(t.given), fmt))
    await s.flush()
    cols = Columns(t)
    while True:
        kind, body = await s.read_message()
        if kind == b"d":
            if not r.ended:
                r.feed(body, cols)
        elif kind == b"c":
            r.finish(cols)
            break
        elif kind == b"f":
            reason = body.rstrip(b"\0").decode(errors="replace")
            raise PgError("57014", f"COPY from stdin failed: {reason}")
        elif kind in (b"H", b"S"):  # Flush and Sync are ignored during COPY, as PostgreSQL does
            continue
        else:
            raise PgError(
                "08P01", f"unexpected message type 0x{kind[0]:02X} during COPY from stdin"
            )
    # decoding a large COPY takes a while: on the worker thread, not the event loop
    n = await s.engine_call(
        lambda engine, ctx: _copy_rows(engine, t.table, _decoded(t, schema, cols, stmt), ctx)
    )
    s.send(codec.command_complete(f"COPY {n}"))


def _decoded(
    t: Target, schema: pa.Schema, cols: Columns, stmt: CopyFrom
) -> pa.Table | list[tuple[Any, ...]]:
    fmt = stmt.options.format
    fast = columnar(t, schema, cols) if fmt != "binary" else None
    return fast if fast is not None else rows(t, cols, fmt)


def _copy_schema(engine: object, table: str, ctx: object) -> pa.Schema:
    fn = getattr(engine, "copy_schema", None)
    if fn is None:
        raise PgError("0A000", "COPY FROM STDIN is not supported by this server's engine")
    schema: pa.Schema = fn(table, ctx)
    return schema


def _copy_rows(
    engine: object, table: str, parsed: pa.Table | list[tuple[Any, ...]], ctx: object
) -> int:
    n: int = engine.copy_in(table, parsed, ctx)  # type: ignore[attr-defined]
    return n
