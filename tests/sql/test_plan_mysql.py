"""Planning MySQL connections and sources in Materialize's DDL (no server)."""

from __future__ import annotations

import pytest

from spate.sql import MemoryCatalog, SqlError, plan_statements
from spate.sql import statements as st


def _one(sql: str, cat: MemoryCatalog) -> st.Statement:
    (s,) = plan_statements(sql, cat)
    return s


@pytest.fixture
def cat() -> MemoryCatalog:
    c = MemoryCatalog()
    c.add("pw", None, "secret")
    c.add("my", None, "connection")
    return c


def test_connection(cat: MemoryCatalog) -> None:
    s = _one(
        "CREATE CONNECTION m TO MYSQL (HOST 'db', PORT 3307, USER 'repl', PASSWORD SECRET pw)", cat
    )
    assert isinstance(s, st.CreateConnection) and s.kind == "mysql"
    assert s.password_secret == "pw"
    assert dict(s.options) == {"host": "db", "port": "3307", "user": "repl"}


def test_sources_for_all_tables_and_for_named_tables(cat: MemoryCatalog) -> None:
    s = _one("CREATE SOURCE s FROM MYSQL CONNECTION my FOR ALL TABLES", cat)
    assert isinstance(s, st.CreateSource) and s.kind == "mysql" and s.connection == "my"
    assert s.tables is None and s.names == () and s.options == ()
    s = _one(
        "CREATE SOURCE s FROM MYSQL CONNECTION my (SERVER ID 4242) "
        "FOR TABLES (shop.orders, shop.items AS line_items)",
        cat,
    )
    assert isinstance(s, st.CreateSource)
    assert s.tables == ("shop.orders", "shop.items")
    assert s.names == (("shop.items", "line_items"),)
    assert dict(s.options) == {"server id": 4242}


@pytest.mark.parametrize(
    ("bad", "complaint"),
    [
        ("CREATE CONNECTION m TO MYSQL (PORT 3306)", "needs HOST"),
        ("CREATE CONNECTION m TO MYSQL (HOST 'h', DATABASE 'x')", "unknown MySQL connection"),
        ("CREATE CONNECTION m TO MYSQL (HOST 'h', PASSWORD SECRET nope)", "does not exist"),
        ("CREATE SOURCE s FROM MYSQL CONNECTION nope FOR ALL TABLES", "does not exist"),
        ("CREATE SOURCE s FROM MYSQL CONNECTION my", "FOR ALL TABLES"),
        ("CREATE SOURCE s FROM MYSQL CONNECTION my FOR TABLES (orders)", "database.table"),
        ("CREATE SOURCE s FROM MYSQL CONNECTION my (SLOT 'x') FOR ALL TABLES", "SERVER ID"),
        ("CREATE SOURCE s FROM MYSQL CONNECTION my (SERVER ID 0) FOR ALL TABLES", "SERVER ID"),
    ],
)
def test_bad_statements_name_what_is_wrong(cat: MemoryCatalog, bad: str, complaint: str) -> None:
    with pytest.raises(SqlError, match=complaint):
        plan_statements(bad, cat)
