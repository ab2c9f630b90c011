"""Connecting to MariaDB, checking that it can feed a source, describing its tables.

:func:`describe_source` checks everything a MySQL source needs and returns its tables, or raises
:class:`~spate.storage.sources.source.SourceError` saying what is wrong and how to fix it:

* the server is MariaDB (its GTIDs are ``domain-server-sequence``) with the binary log on,
  ``binlog_format = ROW``, ``binlog_row_image = FULL`` (updates and deletes carry the whole old
  row, which spate retracts) and ``binlog_row_metadata = FULL`` (row events name their columns
  and say which integers are unsigned);
* every table exists, is a base table and has columns of supported types (:mod:`.types`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pymysql

from spate.repr.desc import RESERVED_COLUMNS, Column, RelationDesc
from spate.repr.types import TEXT
from spate.storage.sources.mysql.types import column_type
from spate.storage.sources.source import SourceError, SourceUnavailable

Conn = Any  # a PyMySQL connection (the library has no type hints)
SYSTEM_DATABASES: Final = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


@dataclass(frozen=True, slots=True)
class MySqlTable:
    """One upstream table and its columns as spate stores them."""

    database: str
    name: str
    desc: RelationDesc

    @property
    def output(self) -> str:
        """The output (export reference) of the table: ``database.table``."""
        return f"{self.database}.{self.name}"

    @property
    def sql_name(self) -> str:
        return f"{quote_ident(self.database)}.{quote_ident(self.name)}"


ERRORS_OUTPUT: Final = "errors"
"""The output where a table that fails upstream (an incompatible ALTER, a TRUNCATE, a DROP)
gets a row; the other tables go on. Table outputs always hold a dot, so never clash with it."""
ERRORS_DESC: Final = RelationDesc.of(("table_name", TEXT, False), ("error", TEXT, False))


def source_outputs(tables: Sequence[MySqlTable]) -> dict[str, RelationDesc]:
    """The outputs of a source of ``tables``: one per table, and :data:`ERRORS_OUTPUT`."""
    return {**{t.output: t.desc for t in tables}, ERRORS_OUTPUT: ERRORS_DESC}


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def split_table_name(name: str) -> tuple[str, str]:
    """``"database.table"``."""
    database, sep, table = name.partition(".")
    if not sep or not database or not table or "." in table:
        raise SourceError(f"not a MySQL table name: {name!r} (expected database.table)")
    return database, table


def settings_of(secret_value: str) -> dict[str, Any]:
    """The connection settings held by a MySQL connection's secret (a JSON object)."""
    try:
        settings = json.loads(secret_value)
    except ValueError:
        raise SourceError("a MySQL connection's settings are not a JSON object") from None
    if not isinstance(settings, dict) or "host" not in settings:
        raise SourceError("a MySQL connection's settings need a host")
    return {
        "host": str(settings["host"]),
        "port": int(settings.get("port", 3306)),
        "user": str(settings.get("user", "root")),
        "password": str(settings.get("password") or ""),
    }


def connect(settings: dict[str, Any]) -> Conn:
    """A session for catalog queries and snapshots (UTC, autocommit); connection failures
    are ``SourceUnavailable`` (the message names the host, never the password)."""
    try:
        conn = pymysql.connect(
            host=settings["host"],
            port=settings["port"],
            user=settings["user"],
            password=settings["password"],
            autocommit=True,
            connect_timeout=10,
            charset="utf8mb4",
        )
    except pymysql.err.OperationalError as e:
        raise SourceUnavailable(
            f"cannot connect to the MySQL source at {settings['host']}:{settings['port']}: "
            f"{e.args[-1] if e.args else e}"
        ) from None
    with conn.cursor() as cur:
        cur.execute("set time_zone = '+00:00'")
    return conn


def _variables(conn: Conn) -> dict[str, str]:
    with conn.cursor() as cur:
        cur.execute(
            "select @@version, @@log_bin, @@binlog_format, @@binlog_row_image, "
            "@@binlog_row_metadata"
        )
        row = cur.fetchone()
    assert row is not None
    names = ("version", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata")
    return {k: str(v) for k, v in zip(names, row, strict=True)}


def check_server(conn: Conn) -> None:
    """Raise ``SourceError`` unless the server's binlog can feed a source."""
    try:
        v = _variables(conn)
    except pymysql.err.MySQLError as e:
        if e.args and e.args[0] == 1193:  # unknown variable: not a MariaDB >= 10.5
            raise SourceError(
                "the MySQL source needs MariaDB 10.5 or later (binlog_row_metadata); "
                "MySQL servers are not supported yet"
            ) from None
        raise SourceUnavailable(f"cannot read the MySQL server's settings: {e}") from None
    if "mariadb" not in v["version"].lower():
        raise SourceError(
            f"the MySQL source reads MariaDB's GTIDs; server version {v['version']} is not "
            "MariaDB (MySQL servers are not supported yet)"
        )
    wanted = {"log_bin": "1", "binlog_format": "ROW", "binlog_row_image": "FULL"}
    wanted["binlog_row_metadata"] = "FULL"
    wrong = [f"{k} = {v[k]}" for k, want in wanted.items() if v[k].upper() != want]
    if wrong:
        raise SourceError(
            f"the MariaDB server runs with {', '.join(wrong)}; a MySQL source needs log_bin "
            "on, binlog_format = ROW, binlog_row_image = FULL and binlog_row_metadata = FULL "
            "(set them in the server's configuration: --log-bin --binlog-format=ROW "
            "--binlog-row-image=FULL --binlog-row-metadata=FULL)"
        )


def describe_table(conn: Conn, database: str, name: str) -> MySqlTable:
    qualified = f"{database}.{name}"
    with conn.cursor() as cur:
        cur.execute(
            "select table_type from information_schema.tables "
            "where table_schema = %s and table_name = %s",
            (database, name),
        )
        row = cur.fetchone()
        if row is None:
            raise SourceError(f"table {qualified} does not exist upstream")
        if row[0] != "BASE TABLE":
            raise SourceError(f"{qualified} is not a table ({row[0]})")
        cur.execute(
            "select column_name, data_type, column_type, numeric_precision, numeric_scale, "
            "is_nullable from information_schema.columns "
            "where table_schema = %s and table_name = %s order by ordinal_position",
            (database, name),
        )
        cols = cur.fetchall()
    columns = []
    for cname, data_type, ctype, precision, scale, nullable in cols:
        if cname in RESERVED_COLUMNS:
            raise SourceError(
                f"table {qualified}, column {cname!r}: the name is reserved by spate "
                f"({', '.join(sorted(RESERVED_COLUMNS))})"
            )
        t = column_type(
            str(data_type),
            str(ctype),
            None if precision is None else int(precision),
            None if scale is None else int(scale),
            table=qualified,
            column=str(cname),
        )
        columns.append(Column(str(cname), t, nullable == "YES"))
    if not columns:
        raise SourceError(f"table {qualified} has no columns")
    return MySqlTable(database, name, RelationDesc(columns))


def all_tables(conn: Conn) -> list[tuple[str, str]]:
    """Every base table outside the system databases, sorted."""
    with conn.cursor() as cur:
        cur.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_type = 'BASE TABLE' order by table_schema, table_name"
        )
        rows = cur.fetchall()
    return [(str(d), str(t)) for d, t in rows if str(d).lower() not in SYSTEM_DATABASES]


def describe_source(
    settings: dict[str, Any], tables: Sequence[str] | None = None
) -> list[MySqlTable]:
    """Validate the upstream side of a MySQL source and return its tables (``tables``:
    ``database.table`` names; ``None``: every table outside the system databases)."""
    conn = connect(settings)
    try:
        check_server(conn)
        wanted = all_tables(conn) if tables is None else [split_table_name(t) for t in tables]
        if not wanted:
            raise SourceError("the MySQL server has no tables to replicate")
        described = [describe_table(conn, d, t) for d, t in wanted]
    finally:
        conn.close()
    outputs = [t.output for t in described]
    if len(set(outputs)) != len(outputs):
        raise SourceError(f"tables named twice: {', '.join(outputs)}")
    return described
