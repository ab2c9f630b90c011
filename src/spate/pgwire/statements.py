"""Statements the session answers itself: transactions, SET/SHOW, cursors, COPY, no-ops.

:func:`classify` looks at one statement (comments already stripped) and returns what it is;
anything it does not recognise goes to the catalog emulation or the engine. spate's own SHOW
commands (``SHOW TABLES``, ``SHOW COLUMNS FROM t``…) are left to the engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from spate.pgwire.copy import CopyFrom, copy_to_header, parse_copy_from
from spate.pgwire.errors import SYNTAX_ERROR, PgError

_ENGINE_SHOW: Final = frozenset(
    [
        "tables",
        "views",
        "materialized",
        "sources",
        "sinks",
        "indexes",
        "clusters",
        "cluster",
        "columns",
        "create",
        "objects",
        "secrets",
        "connections",
        "schemas",
        "databases",
        "subsources",
    ]
)

# Variables reported to the client in ParameterStatus when they change.
REPORTED: Final = frozenset(
    [
        "application_name",
        "client_encoding",
        "datestyle",
        "integer_datetimes",
        "intervalstyle",
        "is_superuser",
        "server_encoding",
        "server_version",
        "session_authorization",
        "standard_conforming_strings",
        "timezone",
    ]
)


@dataclass(frozen=True, slots=True)
class Begin:
    read_only: bool = False  # BEGIN READ ONLY


@dataclass(frozen=True, slots=True)
class Commit:
    pass


@dataclass(frozen=True, slots=True)
class Rollback:
    to_savepoint: bool = False
    savepoint: str | None = None  # ROLLBACK TO SAVEPOINT name


@dataclass(frozen=True, slots=True)
class NoOp:
    tag: str
    in_transaction: bool = False  # SAVEPOINT / RELEASE: only inside a block
    savepoint: str | None = None  # SAVEPOINT name, RELEASE [SAVEPOINT] name


@dataclass(frozen=True, slots=True)
class Set:
    name: str | None  # None: a SET this server accepts and ignores (SET TRANSACTION …)
    value: str | None  # None: RESET


@dataclass(frozen=True, slots=True)
class Show:
    name: str  # lower-case; "all" for SHOW ALL


@dataclass(frozen=True, slots=True)
class Declare:
    name: str
    query: str


@dataclass(frozen=True, slots=True)
class Fetch:
    name: str
    count: int | None  # None: ALL
    timeout: float | None


@dataclass(frozen=True, slots=True)
class Close:
    name: str | None  # None: CLOSE ALL


@dataclass(frozen=True, slots=True)
class Copy:
    query: str
    format: str  # text | csv
    header: bool = False


SessionStatement = (
    Begin | Commit | Rollback | NoOp | Set | Show | Declare | Fetch | Close | Copy | CopyFrom
)

_IDENT: Final = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_DECLARE: Final = re.compile(
    rf"DECLARE\s+({_IDENT})\s+(?:BINARY\s+)?(?:INSENSITIVE\s+)?(?:NO\s+)?(?:SCROLL\s+)?"
    rf"CURSOR\s+(?:WITH(?:OUT)?\s+HOLD\s+)?FOR\s+(.+)",
    re.I | re.S,
)
_FETCH: Final = re.compile(
    rf"FETCH\s+(?:(NEXT|ALL|FORWARD\s+ALL|FORWARD\s+\d+|FORWARD|\d+)\s+)?(?:(?:FROM|IN)\s+)?"
    rf"({_IDENT})\s*(?:WITH\s*\(\s*TIMEOUT\s*=\s*'?([^')]*)'?\s*\))?\s*",
    re.I | re.S,
)
_SET: Final = re.compile(
    r"SET\s+(?:SESSION\s+|LOCAL\s+)?([\w.]+)\s*(?:=|\sTO\s)\s*(.+)", re.I | re.S
)
_COPY: Final = re.compile(r"COPY\s+(.+?)\s+TO\s+STDOUT\s*(.*)", re.I | re.S)
_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*", re.I)


def _savepoint(words: list[str]) -> str | None:
    return unquote(words[0]) if words else None


def unquote(name: str) -> str:
    if name.startswith('"'):
        return name[1:-1].replace('""', '"')
    return name.lower()


def _value(text: str) -> str:
    v = text.strip()
    if v.startswith("'") and v.endswith("'") and len(v) >= 2:
        return v[1:-1].replace("''", "'")
    if v.startswith('"') and v.endswith('"') and len(v) >= 2:
        return v[1:-1]
    return v


def duration_seconds(text: str) -> float:
    m = _DURATION.fullmatch(text)
    if not m:
        raise PgError("22023", f"invalid timeout {text!r}: expected a duration such as '1s'")
    n = float(m.group(1))
    unit = (m.group(2) or "s").lower()
    return n * {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}[unit]


def classify(sql: str) -> SessionStatement | None:
    s = sql.strip().rstrip(";").strip()
    words = s.split(None, 3)
    if not words:
        return None
    head = words[0].upper()
    second = words[1].upper() if len(words) > 1 else ""
    if head == "BEGIN" or (head == "START" and second == "TRANSACTION"):
        return Begin(read_only=bool(re.search(r"\bREAD\s+ONLY\b", s, re.I)))
    if head in ("COMMIT", "END"):
        return Commit()
    if head in ("ROLLBACK", "ABORT"):
        to = re.search(r"\bTO\s+(?:SAVEPOINT\s+)?(\S+)", s, re.I)
        return Rollback(to_savepoint=to is not None, savepoint=unquote(to.group(1)) if to else None)
    if head == "SAVEPOINT":
        return NoOp("SAVEPOINT", in_transaction=True, savepoint=_savepoint(words[1:]))
    if head == "RELEASE":
        named = [w for w in words[1:2] if w.upper() != "SAVEPOINT"] or words[2:3]
        return NoOp("RELEASE", in_transaction=True, savepoint=_savepoint(named))
    if head == "DISCARD":
        return NoOp("DISCARD ALL" if second == "ALL" else f"DISCARD {second}")
    if head in ("LISTEN", "UNLISTEN"):
        return NoOp(head)
    if head == "DEALLOCATE":
        return NoOp("DEALLOCATE ALL" if re.search(r"\bALL\b", s, re.I) else "DEALLOCATE")
    if head == "SET":
        return _set(s, second)
    if head == "RESET":
        return Set(None if second == "ALL" else unquote(words[1]), None) if second else None
    if head == "SHOW":
        return _show(s, words)
    if head == "DECLARE":
        m = _DECLARE.fullmatch(s)
        if not m:
            raise PgError(SYNTAX_ERROR, f"cannot parse DECLARE: {s[:80]!r}")
        return Declare(unquote(m.group(1)), m.group(2).strip())
    if head in ("FETCH", "MOVE"):
        return _fetch(s)
    if head == "CLOSE":
        return Close(None if second == "ALL" else unquote(words[1])) if second else None
    if head == "COPY":
        return parse_copy_from(s) or _copy(s)
    return None


def _set(s: str, second: str) -> Set:
    if second in ("TRANSACTION", "SESSION") and re.match(
        r"SET\s+(SESSION\s+CHARACTERISTICS|TRANSACTION)", s, re.I
    ):
        return Set(None, None)
    m = re.fullmatch(r"SET\s+(?:SESSION\s+|LOCAL\s+)?TIME\s+ZONE\s+(.+)", s, re.I | re.S)
    if m:
        return Set("timezone", _value(m.group(1)))
    m = re.fullmatch(r"SET\s+(?:SESSION\s+|LOCAL\s+)?NAMES\s+(.+)", s, re.I | re.S)
    if m:
        return Set("client_encoding", _value(m.group(1)))
    m = _SET.fullmatch(s)
    if not m:
        raise PgError(SYNTAX_ERROR, f"cannot parse SET: {s[:80]!r}")
    return Set(m.group(1).lower(), _value(m.group(2)))


def _show(s: str, words: list[str]) -> Show | None:
    rest = s[4:].strip()
    if not rest:
        raise PgError(SYNTAX_ERROR, "SHOW needs a variable name")
    if words[1].lower() in _ENGINE_SHOW and not (len(words) == 2 and words[1].lower() == "cluster"):
        return None
    low = " ".join(rest.lower().split())
    if low == "transaction isolation level":
        return Show("transaction_isolation")
    if low in ("time zone",):
        return Show("timezone")
    return Show(unquote(rest) if rest.startswith('"') else low)


def _fetch(s: str) -> Fetch:
    m = _FETCH.fullmatch(s)
    if not m:
        raise PgError(SYNTAX_ERROR, f"cannot parse FETCH: {s[:80]!r}")
    direction = (m.group(1) or "NEXT").upper().split()
    count: int | None
    if direction[-1] == "ALL":
        count = None
    elif direction[-1].isdigit():
        count = int(direction[-1])
    else:
        count = 1
    timeout = duration_seconds(m.group(3)) if m.group(3) is not None else None
    return Fetch(unquote(m.group(2)), count, timeout)


def _copy(s: str) -> Copy:
    m = _COPY.fullmatch(s)
    if not m:
        raise PgError("0A000", "only COPY … TO STDOUT is supported")
    target, options = m.group(1).strip(), m.group(2).strip()
    if target.startswith("(") and target.endswith(")"):
        query = target[1:-1].strip()
    elif re.fullmatch(rf"{_IDENT}(?:\.{_IDENT})?", target):
        query = f"SELECT * FROM {target}"  # noqa: S608 (an identifier, matched above)
    else:
        raise PgError(SYNTAX_ERROR, f"cannot parse COPY target {target[:80]!r}")
    fmt = "text"
    fm = re.search(r"FORMAT\s*'?(\w+)'?", options, re.I)
    if fm:
        fmt = fm.group(1).lower()
    elif re.search(r"\bCSV\b", options, re.I):
        fmt = "csv"
    if fmt not in ("text", "csv"):
        raise PgError("0A000", f"COPY format {fmt} is not supported (text, csv)")
    return Copy(query, fmt, copy_to_header(s))
