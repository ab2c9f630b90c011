"""CREATE SECRET, CONNECTION, SOURCE and SINK, as Materialize spells them (plus spate's files
source and Parquet sink)::

    CREATE SECRET pgpass AS 'hunter2';
    CREATE CONNECTION pg TO POSTGRES (HOST 'localhost', PORT 5432, USER 'postgres',
                                      PASSWORD SECRET pgpass, DATABASE 'shop');
    CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'mz') FOR TABLES (orders, items);
    CREATE SOURCE auction FROM LOAD GENERATOR AUCTION (TICK INTERVAL '1s') FOR ALL TABLES;
    CREATE SOURCE events (id bigint NOT NULL, body text)
        FROM FILES (PATH '/data/in', FORMAT 'csv', PATTERN '*.csv');
    CREATE SINK out FROM view INTO POSTGRES CONNECTION pg (TABLE 'out', MODE 'upsert', KEY (id));
    CREATE SINK out FROM view INTO PARQUET (PATH '/data/out');

Kafka connections and sources: :mod:`spate.sql.ddl_kafka`; webhook sources:
:mod:`spate.sql.ddl_webhook`; MySQL connections and sources: :mod:`spate.sql.ddl_mysql`.
"""

from __future__ import annotations

import dataclasses

from sqlglot.tokenizer_core import TokenType

from spate.repr.desc import Column, RelationDesc
from spate.sql import ddl_kafka, ddl_mysql, ddl_webhook
from spate.sql import statements as st
from spate.sql.errors import DuplicateObject, FeatureNotSupported, SqlError, UndefinedObject
from spate.sql.scalar import type_from_ast
from spate.sql.statement_planner import StatementPlanner

GENERATORS = ("COUNTER", "AUCTION", "TPCH")
_CONNECTION_OPTIONS = {"HOST", "PORT", "USER", "PASSWORD SECRET", "DATABASE", "SSLMODE"}
_LOADGEN_OPTIONS = {
    "TICK INTERVAL",
    "ROWS PER TICK",
    "SCALE FACTOR",
    "MAX CARDINALITY",
    "SEED",
    "TICKS",
}
_FILE_OPTIONS = {"PATH", "FORMAT", "PATTERN", "HEADER", "POLL INTERVAL"}
_PG_SOURCE_OPTIONS = {"PUBLICATION", "SLOT"}
_PG_SINK_OPTIONS = {"TABLE", "MODE", "KEY", "PROGRESS TABLE"}

Options = dict[str, tuple[str | int | bool, int]]


def plan_create_external(p: StatementPlanner) -> st.Statement:
    c = p.cur
    word = c.word()
    c.i += 1
    if_not_exists = c.accept("IF", "NOT", "EXISTS")
    at = c.here()
    name = c.dotted_name(f"a {word.lower()} name")
    existing = p.catalog.lookup(name)
    if existing is not None and not if_not_exists:
        raise DuplicateObject(
            f'{existing.kind} "{name}" already exists', position=at + 1, text=p.src.text
        )
    if word == "SECRET":
        c.expect("AS")
        value = c.string("the secret's value as a quoted string")
        c.end()
        return st.CreateSecret(p.src.sql, name, value, if_not_exists)
    if word == "CONNECTION":
        return _connection(p, name)
    if word == "SOURCE":
        return _source(p, name)
    return _sink(p, name)


def _check(p: StatementPlanner, opts: Options, allowed: set[str], what: str) -> None:
    for key, (_, pos) in opts.items():
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            raise FeatureNotSupported(
                f"unknown {what} option {key}; options: {known}", position=pos + 1, text=p.src.text
            )


def _connection_object(p: StatementPlanner, at: int) -> str:
    name = p.cur.dotted_name("a connection name")
    obj = p.catalog.lookup(name)
    if obj is None or obj.kind != "connection":
        raise UndefinedObject(
            f'connection "{name}" does not exist', position=at + 1, text=p.src.text
        )
    return name


def _connection(p: StatementPlanner, name: str) -> st.CreateConnection:
    c = p.cur
    c.expect("TO")
    kind = "kafka" if c.accept("KAFKA") else "mysql" if c.accept("MYSQL") else "postgres"
    if kind == "postgres" and not c.accept("POSTGRES"):
        raise FeatureNotSupported(
            "only POSTGRES, KAFKA and MYSQL connections are supported",
            position=c.here() + 1,
            text=p.src.text,
        )
    opts = c.options()
    c.end()
    if kind == "kafka":
        _check(p, opts, ddl_kafka.CONNECTION_OPTIONS, "Kafka connection")
    elif kind == "mysql":
        _check(p, opts, ddl_mysql.CONNECTION_OPTIONS, "MySQL connection")
    else:
        _check(p, opts, _CONNECTION_OPTIONS, "connection")
    secret = None
    for secret_option in ("PASSWORD SECRET", "SASL PASSWORD SECRET"):
        if secret_option not in opts:
            continue
        secret_name, pos = opts.pop(secret_option)
        obj = p.catalog.lookup(str(secret_name))
        if obj is None or obj.kind != "secret":
            raise UndefinedObject(
                f'secret "{secret_name}" does not exist', position=pos + 1, text=p.src.text
            )
        secret = str(secret_name)
    required = "BROKER" if kind == "kafka" else "HOST"
    if required not in opts:
        raise SqlError(
            f"a {kind.upper()} connection needs {required}",
            position=p.src.start + 1,
            text=p.src.text,
        )
    options = tuple(sorted((k.lower(), str(v)) for k, (v, _) in opts.items()))
    return st.CreateConnection(p.src.sql, name, kind, options, secret)


def _columns(p: StatementPlanner) -> RelationDesc | None:
    """``(name type [NOT NULL], …)`` after a source's name, if there."""
    c = p.cur
    tok = c.peek()
    if tok is None or tok.token_type is not TokenType.L_PAREN:
        return None
    start = c.here()
    c.skip_parens()
    end = p.tokens[c.i - 1].end + 1
    from spate.sql.parse import Source, parse_sql

    text = "CREATE TABLE _x " + p.src.text[start:end]
    pad = Source(text, 0, len(text), p.src.dialect)
    node = parse_sql(pad, 0)
    columns: list[Column] = []
    for item in node.this.expressions:
        t = type_from_ast(item.args["kind"])
        if t.scalar is None:
            raise FeatureNotSupported(
                f"type {t} cannot be stored", position=start + 1, text=p.src.text
            )
        nullable = not any(
            type(cons.args.get("kind")).__name__ == "NotNullColumnConstraint"
            for cons in item.args.get("constraints") or []
        )
        columns.append(Column(item.name, t.scalar, nullable))
    return RelationDesc(columns)


def _source(p: StatementPlanner, name: str) -> st.CreateSource:
    c = p.cur
    desc = _columns(p)
    if c.accept("IN", "CLUSTER"):
        c.name("a cluster name")  # sources run on the storage replica; accepted, not used
    c.expect("FROM")
    tables: tuple[str, ...] | None = None
    if c.accept("LOAD", "GENERATOR"):
        generator = c.word_in(
            GENERATORS, lambda w: f"unknown load generator {w}; generators: {', '.join(GENERATORS)}"
        )
        opts: Options = {}
        if (tok := c.peek()) is not None and tok.token_type is TokenType.L_PAREN:
            opts = c.options()
        _check(p, opts, _LOADGEN_OPTIONS, "load generator")
        c.accept("FOR", "ALL", "TABLES")
        c.end()
        options = (("generator", generator.lower()), *_plain(opts))
        return st.CreateSource(p.src.sql, name, "load-generator", options)
    if c.accept("POSTGRES"):
        c.expect("CONNECTION")
        connection = _connection_object(p, c.here())
        opts = c.options()
        _check(p, opts, _PG_SOURCE_OPTIONS, "PostgreSQL source")
        if "PUBLICATION" not in opts:
            raise SqlError(
                "a POSTGRES source needs PUBLICATION", text=p.src.text, position=p.src.start + 1
            )
        if c.accept("FOR", "ALL", "TABLES"):
            tables = None
        elif c.accept("FOR", "TABLES"):
            tables = tuple(_qualified(n) for n in c.name_list("a table name"))
        c.end()
        return st.CreateSource(p.src.sql, name, "postgres", _plain(opts), connection, tables)
    if c.accept("WEBHOOK"):
        return ddl_webhook.plan_source(p, name)
    if c.accept("MYSQL"):
        c.expect("CONNECTION")
        return ddl_mysql.plan_source(p, name, _connection_object(p, c.here()))
    if c.accept("KAFKA"):
        c.expect("CONNECTION")
        connection = _connection_object(p, c.here())
        kafka = ddl_kafka.plan_source(p, name, connection)
        return dataclasses.replace(kafka, desc=desc)
    if c.accept("FILES"):
        opts = c.options()
        _check(p, opts, _FILE_OPTIONS, "files source")
        c.end()
        if "PATH" not in opts or "FORMAT" not in opts:
            raise SqlError(
                "a FILES source needs PATH and FORMAT", text=p.src.text, position=p.src.start + 1
            )
        if desc is None:
            raise SqlError(
                "a FILES source needs its columns: CREATE SOURCE name (col type, …) FROM FILES …",
                text=p.src.text,
                position=p.src.start + 1,
            )
        return st.CreateSource(p.src.sql, name, "files", _plain(opts), None, None, desc)
    raise c.error(
        "expected LOAD GENERATOR, POSTGRES CONNECTION, KAFKA CONNECTION, MYSQL CONNECTION, "
        "WEBHOOK or FILES"
    )


def _qualified(table: str) -> str:
    return table if "." in table else f"public.{table}"


def _plain(opts: Options) -> tuple[tuple[str, str | int | bool], ...]:
    return tuple(sorted((k.lower(), v) for k, (v, _) in opts.items()))


def _sink(p: StatementPlanner, name: str) -> st.CreateSink:
    c = p.cur
    if c.accept("IN", "CLUSTER"):
        c.name("a cluster name")
    c.expect("FROM")
    at = c.here()
    from_ = c.dotted_name("an object name")
    p.readable(from_, at)
    c.expect("INTO")
    if c.accept("KAFKA"):
        c.expect("CONNECTION")
        return ddl_kafka.plan_sink(p, name, from_, _connection_object(p, c.here()))
    if c.accept("POSTGRES"):
        c.expect("CONNECTION")
        connection = _connection_object(p, c.here())
        key: tuple[str, ...] = ()
        opts: Options = {}
        # KEY (a, b) is a list: read the options by hand around it
        c.expect_token(TokenType.L_PAREN, "(")
        while True:
            if c.accept("KEY"):
                key = tuple(c.name_list("a key column"))
            else:
                pos = c.here()
                words = []
                while (
                    c.word()
                    and c.word() not in ("KEY",)
                    and (tok := c.peek()) is not None
                    and tok.token_type not in (TokenType.STRING, TokenType.EQ, TokenType.NUMBER)
                ):
                    words.append(c.word())
                    c.i += 1
                c.accept_token(TokenType.EQ)
                opts[" ".join(words)] = (c.value(), pos)
            if not c.accept_token(TokenType.COMMA):
                break
        c.expect_token(TokenType.R_PAREN, ")")
        c.end()
        _check(p, opts, _PG_SINK_OPTIONS, "PostgreSQL sink")
        if "TABLE" not in opts:
            raise SqlError("a POSTGRES sink needs TABLE", text=p.src.text, position=p.src.start + 1)
        options = (*_plain(opts), ("key", ",".join(key)))
        return st.CreateSink(p.src.sql, name, from_, "postgres", options, connection)
    if c.accept("PARQUET"):
        opts = c.options()
        _check(p, opts, {"PATH"}, "Parquet sink")
        c.end()
        if "PATH" not in opts:
            raise SqlError("a PARQUET sink needs PATH", text=p.src.text, position=p.src.start + 1)
        return st.CreateSink(p.src.sql, name, from_, "parquet", _plain(opts))
    raise c.error("expected INTO POSTGRES CONNECTION … or INTO PARQUET (PATH '…')")
