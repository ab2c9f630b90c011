"""Describing and validating upstream PostgreSQL tables before a source is created.

:func:`describe_source` checks everything a PostgreSQL source needs and returns its
configuration, or raises :class:`~spate.storage.sources.source.SourceError` saying what is wrong
and how to fix it; nothing is created upstream or in spate on error:

* the server runs with ``wal_level = logical``;
* the publication exists and publishes inserts, updates and deletes of every table;
* every table exists, has columns of supported types (:mod:`.types`), and has
  ``REPLICA IDENTITY FULL``. Updates and deletes become retractions of the old row, and only
  ``FULL`` makes PostgreSQL send whole old rows; a table without a primary key or replica
  identity cannot even publish its updates and deletes.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from spate.repr.desc import RESERVED_COLUMNS, Column, RelationDesc
from spate.storage.sources.postgres.config import PostgresConnection, PostgresTable, quote_ident
from spate.storage.sources.postgres.types import scalar_type
from spate.storage.sources.source import SourceError, SourceUnavailable


def split_table_name(name: str) -> tuple[str, str]:
    """``"schema.table"`` or ``"table"`` (schema ``public``)."""
    schema, sep, table = name.partition(".")
    if not sep:
        return "public", name
    if not schema or not table or "." in table:
        raise SourceError(f"not a table name: {name!r} (expected table or schema.table)")
    return schema, table


def connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection for catalog queries; connection failures are ``SourceUnavailable``."""
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as e:
        # The message of libpq may contain the host but not the password.
        raise SourceUnavailable(f"cannot connect to the PostgreSQL source: {e}") from None


def check_wal_level(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    row = conn.execute("show wal_level").fetchone()
    level = str(row[0]) if row else "?"
    if level != "logical":
        raise SourceError(
            f"the PostgreSQL server runs with wal_level = {level}; logical replication needs "
            "wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart the server)"
        )


def describe_table(
    conn: psycopg.Connection[tuple[object, ...]], schema: str, name: str
) -> PostgresTable:
    qualified = f"{schema}.{name}"
    row = conn.execute(
        "select c.oid, c.relreplident, c.relkind from pg_class c "
        "join pg_namespace n on n.oid = c.relnamespace where n.nspname = %s and c.relname = %s",
        (schema, name),
    ).fetchone()
    if row is None:
        raise SourceError(f"table {qualified} does not exist upstream")
    oid, identity, kind = row
    if kind not in ("r", "p"):
        raise SourceError(f"{qualified} is not a table (relkind {kind!r})")
    has_pk = conn.execute(
        "select exists (select 1 from pg_index where indrelid = %s and indisprimary)", (oid,)
    ).fetchone()
    alter = f"ALTER TABLE {quote_ident(schema)}.{quote_ident(name)} REPLICA IDENTITY FULL"
    if identity != "f":
        if identity == "n" or (identity == "d" and not (has_pk and has_pk[0])):
            raise SourceError(
                f"table {qualified} has no primary key or replica identity, so its updates and "
                f"deletes cannot be replicated; spate needs REPLICA IDENTITY FULL: {alter}"
            )
        raise SourceError(
            f"table {qualified} has REPLICA IDENTITY {'DEFAULT' if identity == 'd' else 'INDEX'}"
            ", which sends only the key of old rows; spate retracts whole old rows and needs "
            f"REPLICA IDENTITY FULL: {alter}"
        )
    cols = conn.execute(
        "select attname, atttypid, atttypmod, attnotnull, format_type(atttypid, atttypmod) "
        "from pg_attribute where attrelid = %s and attnum > 0 and not attisdropped "
        "order by attnum",
        (oid,),
    ).fetchall()
    if not cols:
        raise SourceError(f"table {qualified} has no columns")
    columns = []
    oids = []
    for attname, typid, typmod, notnull, typname in cols:
        assert isinstance(attname, str) and isinstance(typid, int) and isinstance(typmod, int)
        if attname in RESERVED_COLUMNS:
            raise SourceError(
                f"table {qualified}, column {attname!r}: the name is reserved by spate "
                f"({', '.join(sorted(RESERVED_COLUMNS))})"
            )
        t = scalar_type(typid, typmod, str(typname), table=qualified, column=attname)
        columns.append(Column(attname, t, not notnull))
        oids.append(typid)
    return PostgresTable(schema, name, RelationDesc(columns), tuple(oids))


def describe_source(
    url: str,
    *,
    publication: str,
    slot: str,
    tables: Sequence[str] | None = None,
) -> PostgresConnection:
    """Validate the upstream side of a PostgreSQL source and return its configuration.

    ``tables`` defaults to every table of the publication.
    """
    if not slot.replace("_", "").isalnum() or not slot.islower() or len(slot) > 63:
        raise SourceError(
            f"replication slot name {slot!r} must be lower-case letters, digits and _ (at most 63)"
        )
    with connect(url) as conn:
        check_wal_level(conn)
        pub = conn.execute(
            "select pubinsert, pubupdate, pubdelete from pg_publication where pubname = %s",
            (publication,),
        ).fetchone()
        if pub is None:
            raise SourceError(f"publication {publication!r} does not exist upstream")
        if not all(pub):
            raise SourceError(
                f"publication {publication!r} must publish insert, update and delete "
                f"(it publishes insert={pub[0]}, update={pub[1]}, delete={pub[2]})"
            )
        published = {
            (str(s), str(t))
            for s, t in conn.execute(
                "select schemaname, tablename from pg_publication_tables where pubname = %s",
                (publication,),
            ).fetchall()
        }
        wanted = sorted(published) if tables is None else [split_table_name(t) for t in tables]
        if not wanted:
            raise SourceError(f"publication {publication!r} has no tables")
        described = []
        for schema, name in wanted:
            table = describe_table(conn, schema, name)
            if (schema, name) not in published:
                raise SourceError(
                    f"table {schema}.{name} is not in publication {publication!r} "
                    f"(ALTER PUBLICATION {quote_ident(publication)} ADD TABLE "
                    f"{quote_ident(schema)}.{quote_ident(name)})"
                )
            described.append(table)
    outputs = [t.output for t in described]
    if len(set(outputs)) != len(outputs):
        raise SourceError(f"tables named twice: {', '.join(outputs)}")
    return PostgresConnection(url, publication, slot, tuple(described))
