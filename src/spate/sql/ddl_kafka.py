"""Kafka in ``CREATE CONNECTION`` and ``CREATE SOURCE``, as Materialize spells them::

    CREATE CONNECTION k TO KAFKA (BROKER 'localhost:9092' [, SECURITY PROTOCOL 'SASL_SSL',
                                  SASL MECHANISMS 'PLAIN', SASL USERNAME 'u',
                                  SASL PASSWORD SECRET pw]);
    CREATE SOURCE s [(col type, …)] FROM KAFKA CONNECTION k (TOPIC 't' [, START OFFSET (0, 10)])
        [KEY FORMAT f VALUE FORMAT f | FORMAT f]
        [INCLUDE KEY, PARTITION, OFFSET, TIMESTAMP, HEADERS]
        [ENVELOPE NONE | UPSERT | DEBEZIUM];

with ``f`` one of ``TEXT``, ``BYTES``, ``JSON``, ``CSV WITH n COLUMNS``, ``AVRO USING SCHEMA
'…'``. Declared columns take a JSON value's fields. The source's data is the subsource
``<s>_data``; records that do not decode are in ``<s>_errors``.
"""

from __future__ import annotations

from sqlglot.tokenizer_core import TokenType

from spate.sql import statements as st
from spate.sql.errors import FeatureNotSupported, SqlError
from spate.sql.statement_planner import StatementPlanner

CONNECTION_OPTIONS = {
    "BROKER",
    "SECURITY PROTOCOL",
    "SASL MECHANISMS",
    "SASL USERNAME",
    "SASL PASSWORD SECRET",
    "PROGRESS TOPIC",
}
_FORMATS = ("TEXT", "BYTES", "JSON", "CSV", "AVRO")
_INCLUDABLE = ("KEY", "PARTITION", "OFFSET", "TIMESTAMP", "HEADERS")
_ENVELOPES = ("NONE", "UPSERT", "DEBEZIUM")


def _format(p: StatementPlanner, options: list[tuple[str, str | int | bool]], which: str) -> str:
    c = p.cur
    at = c.here()
    word = c.word_in(_FORMATS, lambda w: f"unknown format {w}; formats: {', '.join(_FORMATS)}")
    if word == "CSV":
        c.expect("WITH")
        n = c.integer("the number of columns")
        c.expect("COLUMNS")
        if n < 1:
            raise SqlError("CSV WITH n COLUMNS needs n >= 1", position=at + 1, text=p.src.text)
        options.append((f"{which} csv columns", n))
    elif word == "AVRO":
        if c.accept("USING", "CONFLUENT", "SCHEMA", "REGISTRY"):
            raise FeatureNotSupported(
                "AVRO USING CONFLUENT SCHEMA REGISTRY is not supported; use AVRO USING SCHEMA '…'",
                position=at + 1,
                text=p.src.text,
            )
        c.expect("USING", "SCHEMA")
        options.append((f"{which} avro schema", c.string("the Avro schema as a quoted string")))
    return word.lower()


def plan_source(p: StatementPlanner, name: str, connection: str) -> st.CreateSource:
    """After ``FROM KAFKA CONNECTION k``: the options, formats, INCLUDE and ENVELOPE."""
    c = p.cur
    options: list[tuple[str, str | int | bool]] = []
    c.expect_token(TokenType.L_PAREN, "(")
    while True:
        if c.accept("TOPIC"):
            c.accept_token(TokenType.EQ)
            options.append(("topic", c.string("the topic as a quoted string")))
        elif c.accept("START", "OFFSET"):
            c.accept_token(TokenType.EQ)
            c.expect_token(TokenType.L_PAREN, "(")
            offsets = [c.integer("an offset")]
            while c.accept_token(TokenType.COMMA):
                offsets.append(c.integer("an offset"))
            c.expect_token(TokenType.R_PAREN, ")")
            options.append(("start offset", ",".join(map(str, offsets))))
        else:
            raise c.error("expected TOPIC or START OFFSET")
        if not c.accept_token(TokenType.COMMA):
            break
    c.expect_token(TokenType.R_PAREN, ")")
    if not any(k == "topic" for k, _ in options):
        raise SqlError("a KAFKA source needs TOPIC", position=p.src.start + 1, text=p.src.text)
    value_format = "bytes"
    key_format = None
    if c.accept("KEY", "FORMAT"):
        key_format = _format(p, options, "key")
        c.expect("VALUE", "FORMAT")
        value_format = _format(p, options, "value")
    elif c.accept("FORMAT") or c.accept("VALUE", "FORMAT"):
        value_format = _format(p, options, "value")
    include: list[str] = []
    if c.accept("INCLUDE"):
        while True:
            word = c.word_in(
                _INCLUDABLE, lambda w: f"cannot INCLUDE {w}; INCLUDE takes {', '.join(_INCLUDABLE)}"
            )
            include.append(word.lower())
            if not c.accept_token(TokenType.COMMA):
                break
    envelope = "none"
    if c.accept("ENVELOPE"):
        envelope = c.word_in(
            _ENVELOPES, lambda w: f"unknown envelope {w}; envelopes: {', '.join(_ENVELOPES)}"
        ).lower()
    c.end()
    if key_format is None and (envelope == "upsert" or "key" in include):
        # FORMAT f with a key: Materialize decodes the key in the same format.
        key_format = value_format if value_format in ("text", "bytes", "json") else "bytes"
    options += [("value format", value_format), ("envelope", envelope)]
    if key_format is not None:
        options.append(("key format", key_format))
    if include:
        options.append(("include", ",".join(include)))
    return st.CreateSource(p.src.sql, name, "kafka", tuple(sorted(options)), connection, None, None)


def plan_sink(p: StatementPlanner, name: str, from_: str, connection: str) -> st.CreateSink:
    """After ``INTO KAFKA CONNECTION k``: ``(TOPIC 't' [, PROGRESS TOPIC 'p']) [KEY (a, …)
    [NOT ENFORCED]] FORMAT JSON ENVELOPE UPSERT | DEBEZIUM``."""
    c = p.cur
    options: list[tuple[str, str | int | bool]] = []
    c.expect_token(TokenType.L_PAREN, "(")
    while True:
        if c.accept("TOPIC"):
            c.accept_token(TokenType.EQ)
            options.append(("topic", c.string("the topic as a quoted string")))
        elif c.accept("PROGRESS", "TOPIC"):
            c.accept_token(TokenType.EQ)
            options.append(("progress topic", c.string("the topic as a quoted string")))
        else:
            raise c.error("expected TOPIC or PROGRESS TOPIC")
        if not c.accept_token(TokenType.COMMA):
            break
    c.expect_token(TokenType.R_PAREN, ")")
    if not any(k == "topic" for k, _ in options):
        raise SqlError("a KAFKA sink needs TOPIC", position=p.src.start + 1, text=p.src.text)
    if c.accept("KEY"):
        options.append(("key", ",".join(c.name_list("a key column"))))
        c.accept("NOT", "ENFORCED")
    c.expect("FORMAT")
    at = c.here()
    if not c.accept("JSON"):
        raise FeatureNotSupported(
            "a KAFKA sink writes FORMAT JSON", position=at + 1, text=p.src.text
        )
    c.expect("ENVELOPE")
    at = c.here()
    envelope = c.word_in(
        ("UPSERT", "DEBEZIUM"), lambda w: f"unknown sink envelope {w}; envelopes: UPSERT, DEBEZIUM"
    )
    c.end()
    if envelope == "UPSERT" and not any(k == "key" for k, _ in options):
        raise SqlError("ENVELOPE UPSERT needs KEY (…)", position=at + 1, text=p.src.text)
    options.append(("envelope", envelope.lower()))
    return st.CreateSink(p.src.sql, name, from_, "kafka", tuple(sorted(options)), connection)
