"""Planning Kafka connections and sources in Materialize's DDL."""

from __future__ import annotations

import pytest

from spate.environment import sql_kafka
from spate.environment.definitions import ConnectionEntry
from spate.protocol.kafka import KafkaEnvelope, KafkaFormat
from spate.protocol.secret import Secret
from spate.sql import MemoryCatalog, SqlError, plan_statements
from spate.sql import statements as st


def _one(sql: str, cat: MemoryCatalog) -> st.Statement:
    (s,) = plan_statements(sql, cat)
    return s


@pytest.fixture
def cat() -> MemoryCatalog:
    c = MemoryCatalog()
    c.add("pw", None, "secret")
    c.add("k", None, "connection")
    return c


def test_connection_with_sasl_secret(cat: MemoryCatalog) -> None:
    s = _one(
        "CREATE CONNECTION k2 TO KAFKA (BROKER 'b:9092', SECURITY PROTOCOL 'SASL_SSL', "
        "SASL MECHANISMS 'PLAIN', SASL USERNAME 'u', SASL PASSWORD SECRET pw)",
        cat,
    )
    assert isinstance(s, st.CreateConnection) and s.kind == "kafka"
    assert s.password_secret == "pw"
    assert dict(s.options) == {
        "broker": "b:9092",
        "security protocol": "SASL_SSL",
        "sasl mechanisms": "PLAIN",
        "sasl username": "u",
    }


def test_sources_in_every_format(cat: MemoryCatalog) -> None:
    s = _one(
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't', START OFFSET (0, 10)) "
        "KEY FORMAT TEXT VALUE FORMAT CSV WITH 3 COLUMNS INCLUDE KEY, PARTITION, OFFSET, "
        "TIMESTAMP, HEADERS ENVELOPE UPSERT",
        cat,
    )
    assert isinstance(s, st.CreateSource) and s.kind == "kafka" and s.connection == "k"
    assert dict(s.options) == {
        "topic": "t",
        "start offset": "0,10",
        "key format": "text",
        "value format": "csv",
        "value csv columns": 3,
        "include": "key,partition,offset,timestamp,headers",
        "envelope": "upsert",
    }
    s = _one("CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') FORMAT TEXT ENVELOPE UPSERT", cat)
    assert isinstance(s, st.CreateSource)
    assert dict(s.options)["key format"] == "text"  # FORMAT with a key: the key too
    s = _one(
        "CREATE SOURCE s (id bigint NOT NULL, v text) FROM KAFKA CONNECTION k (TOPIC 't') "
        "FORMAT JSON ENVELOPE DEBEZIUM",
        cat,
    )
    assert isinstance(s, st.CreateSource) and s.desc is not None and s.desc.names == ("id", "v")
    schema = '{"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}'
    s = _one(
        f"CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') FORMAT AVRO USING SCHEMA '{schema}'",
        cat,
    )
    assert isinstance(s, st.CreateSource) and dict(s.options)["value avro schema"] == schema


@pytest.mark.parametrize(
    "bad",
    [
        "CREATE CONNECTION k3 TO KAFKA (HOST 'h')",
        "CREATE CONNECTION k3 TO KAFKA (SECURITY PROTOCOL 'SSL')",
        "CREATE SOURCE s FROM KAFKA CONNECTION nope (TOPIC 't')",
        "CREATE SOURCE s FROM KAFKA CONNECTION k (START OFFSET (1))",
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') FORMAT XML",
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') FORMAT CSV",
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') INCLUDE EVERYTHING",
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') ENVELOPE MAYBE",
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') FORMAT TEXT trailing",
    ],
)
def test_refused(cat: MemoryCatalog, bad: str) -> None:
    with pytest.raises(SqlError):
        plan_statements(bad, cat)


KAFKA = ConnectionEntry("k", "", "kafka", (("broker", "b:1"), ("sasl username", "u")), secret="pw")
POSTGRES = ConnectionEntry("pg", "", "postgres", (("host", "h"),))


def _settings() -> Secret:
    return sql_kafka.client_settings(KAFKA, "hunter2")


def test_the_source_it_describes(cat: MemoryCatalog) -> None:
    s = _one(
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't', START OFFSET (5)) KEY FORMAT BYTES "
        "VALUE FORMAT JSON INCLUDE KEY ENVELOPE UPSERT",
        cat,
    )
    assert isinstance(s, st.CreateSource)
    source = sql_kafka.source(s, _settings())
    assert source.topic == "t" and source.start_offsets == (5,)
    assert (source.key_format, source.value_format) == (KafkaFormat.BYTES, KafkaFormat.JSON)
    assert source.envelope is KafkaEnvelope.UPSERT and source.include == ("key",)
    assert "hunter2" in source.connection.reveal()  # type: ignore[union-attr]
    assert "hunter2" not in repr(source)
    pg = _one("CREATE SOURCE s2 FROM KAFKA CONNECTION pg (TOPIC 't')", _with(cat, "pg"))
    assert isinstance(pg, st.CreateSource)
    with pytest.raises(SqlError, match="not a KAFKA connection"):
        sql_kafka.client_settings(POSTGRES, None)


def _with(cat: MemoryCatalog, name: str) -> MemoryCatalog:
    cat.add(name, None, "connection")
    return cat


def test_sinks(cat: MemoryCatalog) -> None:
    from spate.repr.desc import RelationDesc
    from spate.repr.types import INT64

    cat.add("v", RelationDesc.of(("id", INT64, False)), "view")
    s = _one(
        "CREATE SINK o FROM v INTO KAFKA CONNECTION k (TOPIC 'out', PROGRESS TOPIC 'p') "
        "KEY (id) NOT ENFORCED FORMAT JSON ENVELOPE UPSERT",
        cat,
    )
    assert isinstance(s, st.CreateSink) and s.kind == "kafka"
    assert dict(s.options) == {
        "topic": "out",
        "progress topic": "p",
        "key": "id",
        "envelope": "upsert",
    }
    conn = sql_kafka.sink(s, _settings())
    assert (conn.topic, conn.key, conn.progress_topic) == ("out", ("id",), "p")
    for bad in (
        "CREATE SINK o FROM v INTO KAFKA CONNECTION k (TOPIC 'o') FORMAT JSON ENVELOPE UPSERT",
        "CREATE SINK o FROM v INTO KAFKA CONNECTION k (TOPIC 'o') FORMAT AVRO ENVELOPE DEBEZIUM",
        "CREATE SINK o FROM v INTO KAFKA CONNECTION k (PROGRESS TOPIC 'p') FORMAT JSON "
        "ENVELOPE DEBEZIUM",
    ):
        with pytest.raises(SqlError):
            plan_statements(bad, cat)
