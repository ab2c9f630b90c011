"""Planning statements and errors: statement values, SQLSTATEs and positions."""

from __future__ import annotations

import pytest

from spate.plan.relation import Get, TopK
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import FLOAT64, INT64, TEXT, TIMESTAMP, numeric
from spate.sql import MemoryCatalog, SqlError, plan_statements
from spate.sql import statements as st


@pytest.fixture
def cat() -> MemoryCatalog:
    c = MemoryCatalog(clusters=["default", "c1"])
    c.add("bids", RelationDesc.of(("auction", INT64, False), ("price", INT64), ("bidder", TEXT)))
    c.add("u", RelationDesc.of(("auction", INT64), ("ts", TIMESTAMP)))
    return c


def one(sql: str, cat: MemoryCatalog) -> st.Statement:
    [s] = plan_statements(sql, cat)
    return s


def test_create_table_types(cat: MemoryCatalog) -> None:
    s = one(
        "CREATE TABLE x (a bigint NOT NULL, b int, c smallint, d numeric(10,2), e double precision,"
        " f real, g text, h varchar(5), i boolean, j date, k timestamp, l timestamptz, m jsonb,"
        " n bytea)",
        cat,
    )
    assert isinstance(s, st.CreateTable)
    assert [str(c.type) for c in s.desc.columns] == [
        "int64", "int64", "int64", "numeric(10,2)", "float64", "float64", "text", "text", "bool",
        "date", "timestamp", "timestamp", "jsonb", "bytes",
    ]  # fmt: skip
    assert not s.desc.columns[0].nullable and s.desc.columns[1].nullable


def test_views_indexes_clusters(cat: MemoryCatalog) -> None:
    s = one(
        "CREATE MATERIALIZED VIEW mv IN CLUSTER c1 AS SELECT auction, max(price) AS top "
        "FROM bids GROUP BY auction",
        cat,
    )
    assert isinstance(s, st.CreateView) and s.materialized and s.cluster == "c1"
    assert s.plan.desc.names == ("auction", "top")
    s = one("CREATE OR REPLACE VIEW v AS SELECT * FROM bids ORDER BY price DESC LIMIT 3", cat)
    assert isinstance(s, st.CreateView) and s.replace
    assert any(isinstance(n, TopK) and n.limit == 3 for n in s.plan.walk())
    s = one("CREATE INDEX i IN CLUSTER c1 ON bids (auction)", cat)
    assert s == st.CreateIndex(s.sql, "i", "bids", ("auction",), "c1")
    s = one("CREATE DEFAULT INDEX ON bids", cat)
    assert isinstance(s, st.CreateIndex) and s.key == ("auction", "price", "bidder")
    assert one("CREATE CLUSTER c2 (REPLICAS (r1, r2))", cat) == st.CreateCluster(
        "CREATE CLUSTER c2 (REPLICAS (r1, r2))", "c2", ("r1", "r2")
    )
    s = one("DROP VIEW IF EXISTS nothing CASCADE", cat)
    assert isinstance(s, st.DropObjects) and s.names == () and s.cascade


def test_reads_subscribe_set_show(cat: MemoryCatalog) -> None:
    s = one("SELECT * FROM bids AS OF 42", cat)
    assert isinstance(s, st.Select) and s.as_of == 42 and isinstance(s.plan, Get)
    s = one("SUBSCRIBE TO bids AS OF 5 UP TO 10 WITH (SNAPSHOT = false)", cat)
    assert isinstance(s, st.Subscribe)
    assert (s.as_of, s.up_to, s.snapshot) == (5, 10, False)
    s = one("SUBSCRIBE (SELECT auction FROM bids WHERE price > 1)", cat)
    assert isinstance(s, st.Subscribe) and s.names == ("auction",)
    assert one("SET cluster = c1", cat) == st.SetVariable("SET cluster = c1", "cluster", "c1")
    s = one("SET transaction_isolation = 'serializable'", cat)
    assert isinstance(s, st.SetVariable) and s.value == "serializable"
    assert isinstance(one("SHOW cluster", cat), st.ShowVariable)
    s = one("SHOW COLUMNS FROM bids", cat)
    assert isinstance(s, st.Rows) and s.rows[0] == ("auction", False, "bigint")
    s = one("EXPLAIN SELECT auction FROM bids WHERE price > 1", cat)
    assert isinstance(s, st.Rows) and "Filter" in "\n".join(r[0] for r in s.rows)  # type: ignore[misc]
    s = one("ALTER MATERIALIZED VIEW bids SET (RETAIN HISTORY = FOR '1h')", cat)
    assert s == st.AlterRetainHistory(s.sql, "bids", 3_600_000)


def test_dml_plans(cat: MemoryCatalog) -> None:
    s = one("INSERT INTO bids (auction, price) VALUES (1, 2.6), (2, NULL)", cat)
    assert isinstance(s, st.Insert) and s.rows == ((1, 3, None), (2, None, None))
    s = one("UPDATE bids SET price = price + 1 WHERE auction = 1", cat)
    assert isinstance(s, st.Update) and s.plan.desc.arity == 6 and s.arity == 3
    s = one("DELETE FROM bids WHERE price IN (SELECT auction FROM u)", cat)
    assert isinstance(s, st.Delete) and s.plan.desc == cat.items["bids"].desc


def test_temporal_filter_plans_now(cat: MemoryCatalog) -> None:
    s = one(
        "CREATE VIEW recent AS SELECT auction FROM u WHERE mz_now() <= ts + INTERVAL '5 minutes'",
        cat,
    )
    assert isinstance(s, st.CreateView)
    assert "now()" in s.plan.explain()


@pytest.mark.parametrize(
    ("sql", "sqlstate", "at"),
    [
        ("SELECT prise FROM bids", "42703", "prise"),
        ("SELECT auction FROM bids, u", "42702", "auction FROM"),
        ("SELECT * FROM nosuch", "42P01", "nosuch"),
        ("SELECT auction, count(*) FROM bids", "42803", "auction,"),
        ("SELECT price FROM bids GROUP BY auction", "42803", "price"),
        ("SELECT auction FROM bids WHERE sum(price) > 1", "42803", "sum"),
        ("SELECT auction + 'x' FROM bids", "22P02", "'x'"),
        ("SELECT auction FROM bids WHERE bidder", "42804", "bidder"),
        ("SELECT DISTINCT auction FROM bids ORDER BY price", "42P10", "price"),
        ("SELECT auction + 1 AS z FROM bids WHERE z > 0", "42703", "z >"),
        ("SELECT nosuchfn(1)", "42883", "nosuchfn"),
        ("CREATE VIEW v AS SELECT 1 FROM bids WHERE mz_now() > now()", "0A000", "now()"),
        ("SELECT (1", "42601", None),
        ("CREATE TABLE z (a char(3))", "0A000", None),
        ("INSERT INTO bids VALUES (1, 2, 'x', 4)", "42601", None),
    ],
)
def test_errors_name_what_and_where(
    cat: MemoryCatalog, sql: str, sqlstate: str, at: str | None
) -> None:
    with pytest.raises(SqlError) as info:
        plan_statements(sql, cat)
    err = info.value
    assert err.sqlstate == sqlstate, str(err)
    if at is not None:
        assert err.position is not None, str(err)
        assert sql[err.position - 1 :].startswith(at), (str(err), err.position)
        assert "^" in str(err)


def test_unquoted_names_fold_to_lower_case(cat: MemoryCatalog) -> None:
    s = one("SELECT AUCTION FROM Bids", cat)
    assert isinstance(s, st.Select) and s.names == ("auction",)
    with pytest.raises(SqlError):
        plan_statements('SELECT * FROM "Bids"', cat)


def test_numeric_types_follow_postgres(cat: MemoryCatalog) -> None:
    s = one("SELECT 1.5 * price, price / 2, avg(price) FROM bids GROUP BY price", cat)
    assert isinstance(s, st.Select)
    types = [str(c.type) for c in s.plan.desc.columns[: s.width]]
    assert types == [str(numeric(38, 1)), "int64", str(numeric(38, 16))]


def test_secrets_connections_sources_and_sinks(cat: MemoryCatalog) -> None:
    s = one("CREATE SECRET pgpass AS 'hunter2'", cat)
    assert s == st.CreateSecret(s.sql, "pgpass", "hunter2")
    assert "hunter2" not in repr(st.CreateSecret) and s.value == "hunter2"
    cat.add("pgpass", None, "secret")
    s = one(
        "CREATE CONNECTION pg TO POSTGRES (HOST 'localhost', PORT 5432, USER 'postgres', "
        "PASSWORD SECRET pgpass, DATABASE 'shop')",
        cat,
    )
    assert isinstance(s, st.CreateConnection) and s.password_secret == "pgpass"
    assert dict(s.options) == {
        "host": "localhost", "port": "5432", "user": "postgres", "database": "shop"
    }  # fmt: skip
    cat.add("pg", None, "connection")
    s = one(
        "CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'mz') FOR TABLES (orders)", cat
    )
    assert isinstance(s, st.CreateSource) and s.kind == "postgres"
    assert (s.connection, s.tables, dict(s.options)) == (
        "pg",
        ("public.orders",),
        {"publication": "mz"},
    )
    s = one(
        "CREATE SOURCE auction FROM LOAD GENERATOR AUCTION (TICK INTERVAL '500ms') FOR ALL TABLES",
        cat,
    )
    assert isinstance(s, st.CreateSource)
    assert dict(s.options) == {"generator": "auction", "tick interval": "500ms"}
    s = one(
        "CREATE SOURCE ev (id bigint NOT NULL, body text) FROM FILES (PATH '/in', FORMAT 'csv')",
        cat,
    )
    assert isinstance(s, st.CreateSource) and s.desc is not None
    assert s.desc.names == ("id", "body") and not s.desc.columns[0].nullable
    s = one(
        "CREATE SINK out FROM bids INTO POSTGRES CONNECTION pg (TABLE 'out', KEY (auction))", cat
    )
    assert isinstance(s, st.CreateSink) and dict(s.options) == {"table": "out", "key": "auction"}
    s = one("CREATE SINK pq FROM bids INTO PARQUET (PATH '/out')", cat)
    assert isinstance(s, st.CreateSink) and s.kind == "parquet"
    for bad in (
        "CREATE SOURCE x FROM LOAD GENERATOR NOPE",
        "CREATE SOURCE x FROM POSTGRES CONNECTION nope (PUBLICATION 'p')",
        "CREATE CONNECTION c2 TO POSTGRES (HOST 'h', PASSWORD SECRET nope)",
        "CREATE SINK k FROM nosuch INTO PARQUET (PATH '/x')",
        "CREATE SOURCE x FROM FILES (PATH '/in', FORMAT 'csv')",
    ):
        with pytest.raises(SqlError):
            plan_statements(bad, cat)


def test_show_create_of_objects_made_from_python() -> None:
    desc = RelationDesc(
        (
            Column("id", INT64, nullable=False),
            Column("Price", numeric(10, 2)),
            Column("f", FLOAT64),
            Column("t", TEXT),
        )
    )
    cat = MemoryCatalog()
    cat.add("bids", desc)  # no create_sql: made through the Python API
    cat.add("v", desc, kind="view")
    (show,) = plan_statements("SHOW CREATE TABLE bids", cat)
    sql = show.rows[0][1]  # type: ignore[attr-defined]
    assert sql == (
        'CREATE TABLE bids (id bigint NOT NULL, "Price" numeric(10,2), f double precision, t text)'
    )
    # the text is equivalent: planning it gives the same columns
    (create,) = plan_statements(sql.replace("bids", "bids2"), MemoryCatalog())
    assert create.desc == desc  # type: ignore[attr-defined]
    (show_view,) = plan_statements("SHOW CREATE VIEW v", cat)
    assert "created through the Python API" in show_view.rows[0][1]  # type: ignore[attr-defined]
