"""Transactions in the environment (no replicas): ``Environment.sql`` blocks (BEGIN … COMMIT /
ROLLBACK) for every write path, with Materialize's rules, and ``env.transaction()``: buffered
writes of several tables committed at one timestamp, or none of them."""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable

import pytest

from spate.environment.api import Environment
from spate.environment.transaction import Transaction
from spate.errors import ConstraintViolation, RowsNotFound, SchemaMismatch, TransactionClosed
from spate.repr import INT64, TEXT, RelationDesc
from spate.sql import SqlError

T = RelationDesc.of(("a", INT64, False), ("b", TEXT))
U = RelationDesc.of(("a", INT64, False))


def rows(env: Environment, name: str, as_of: int | None = None) -> Counter[tuple[object, ...]]:
    read = env.select(name) if as_of is None else env.select(name, as_of=as_of)
    return Counter(tuple(r.values()) for r in read.to_pylist())


@pytest.fixture
def tables(env: Environment) -> Environment:
    env.create_table("t", T)
    env.create_table("u", U)
    env.insert("t", [(1, "one"), (2, "two")])
    return env


@pytest.mark.parametrize(
    "write",
    [
        "INSERT INTO t VALUES (3, 'three')",
        "UPDATE t SET b = 'uno' WHERE a = 1",
        "DELETE FROM t WHERE a = 2",
        "CREATE TABLE v (a bigint)",
    ],
)
def test_sql_rollback_discards_each_write_path(tables: Environment, write: str) -> None:
    env = tables
    before = rows(env, "t")
    env.sql(f"BEGIN; {write}; ROLLBACK")
    assert rows(env, "t") == before
    assert env.runtime.catalog.find("v") is None
    env.sql("BEGIN")  # across calls too: the environment's session keeps the block
    env.sql(write)
    env.sql("ROLLBACK")
    assert rows(env, "t") == before
    assert env.runtime.catalog.find("v") is None


def test_sql_commit_writes_the_block_and_a_failed_block_rolls_back(tables: Environment) -> None:
    env = tables
    env.sql("BEGIN; DELETE FROM t WHERE a = 1; INSERT INTO t VALUES (1, 'new'); COMMIT")
    assert rows(env, "t") == Counter({(1, "new"): 1, (2, "two"): 1})
    env.sql("BEGIN; INSERT INTO u VALUES (5)")
    with pytest.raises(SqlError) as e:
        env.sql("INSERT INTO missing VALUES (1)")
    with pytest.raises(SqlError) as ignored:
        env.sql("INSERT INTO u VALUES (6)")
    assert (e.value.sqlstate, ignored.value.sqlstate) == ("42P01", "25P02")
    env.sql("COMMIT")  # of a failed block: rolls back
    assert rows(env, "u") == Counter()
    env.sql("INSERT INTO u VALUES (7)")  # the session is out of the block
    assert rows(env, "u") == Counter({(7,): 1})


def test_sql_block_rules_of_materialize(tables: Environment) -> None:
    env = tables
    cases = [
        ("SELECT * FROM t", "INSERT INTO u VALUES (1)", "25006"),
        ("INSERT INTO u VALUES (1)", "SELECT * FROM t", "25000"),
        ("INSERT INTO u VALUES (1)", "CREATE TABLE v (a bigint)", "25000"),
        ("CREATE TABLE v (a bigint)", "INSERT INTO u VALUES (1)", "25000"),
        ("CREATE TABLE v (a bigint)", "CREATE TABLE w (a bigint)", "25000"),
        ("INSERT INTO t VALUES (9, 'n')", "DELETE FROM t WHERE a = 9", "0A000"),
        ("READ ONLY", "INSERT INTO u VALUES (1)", "25006"),
    ]
    for first, second, code in cases:
        env.sql(f"BEGIN {first}" if first == "READ ONLY" else f"BEGIN; {first}")
        with pytest.raises(SqlError) as e:
            env.sql(second)
        assert e.value.sqlstate == code, (first, second)
        env.sql("ROLLBACK")
    assert rows(env, "u") == Counter() and env.runtime.catalog.find("v") is None
    env.sql("BEGIN; SHOW cluster; SET application_name = 'x'; CREATE TABLE v (a bigint); COMMIT")
    assert env.runtime.catalog.find("v") is not None


def test_sql_savepoints(tables: Environment) -> None:
    env = tables
    env.sql("BEGIN; INSERT INTO u VALUES (1); SAVEPOINT a; INSERT INTO u VALUES (2)")
    env.sql("SAVEPOINT b; DELETE FROM t WHERE a = 1")
    with pytest.raises(SqlError) as e:
        env.sql("INSERT INTO u VALUES ('bad')")
    assert e.value.sqlstate == "22P02" or e.value.sqlstate.startswith("42")
    env.sql("ROLLBACK TO SAVEPOINT b")  # the DELETE is undone, the block works again
    env.sql("INSERT INTO u VALUES (3); RELEASE a")
    with pytest.raises(SqlError) as gone:
        env.sql("ROLLBACK TO b")  # released with a
    assert gone.value.sqlstate == "3B001"
    env.sql("ROLLBACK")
    assert rows(env, "u") == Counter()
    env.sql("BEGIN; INSERT INTO u VALUES (1); SAVEPOINT a; INSERT INTO u VALUES (2)")
    env.sql("ROLLBACK TO a; COMMIT")
    assert rows(env, "u") == Counter({(1,): 1})
    with pytest.raises(SqlError) as outside:
        env.sql("SAVEPOINT a")
    assert outside.value.sqlstate == "25P01"


def test_sql_reads_of_a_block_are_at_one_timestamp_held_until_its_end(tables: Environment) -> None:
    env = tables
    table = env.runtime.catalog.get("t").id

    def since() -> int:
        value = env.runtime.storage.collection_frontiers(table).since.as_option()
        assert value is not None
        return value

    session = env.sql_session()
    session.sql("BEGIN")
    first = session.sql("SELECT a FROM t")
    block = session.session.block
    assert block is not None and block.read_ts is not None
    env.insert("t", [(3, "three")])
    time.sleep(2.5)  # beyond the table's retained history (1 s): held back for the block
    assert since() <= block.read_ts
    again = session.sql("SELECT a FROM t WHERE a > 0")
    session.sql("COMMIT")
    after = session.sql("SELECT a FROM t")
    assert [x.num_rows for x in (first, again, after)] == [2, 2, 3]
    deadline = time.monotonic() + 30
    while since() <= block.read_ts:  # the holds were given up: compaction goes on
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_sql_commit_after_a_conflicting_write_fails_with_40001(tables: Environment) -> None:
    env = tables
    session = env.sql_session()
    session.sql("BEGIN; UPDATE t SET b = 'uno' WHERE a = 1; INSERT INTO u VALUES (1)")
    env.delete("t", [(1, "one")])
    with pytest.raises(SqlError) as e:
        session.sql("COMMIT")
    assert e.value.sqlstate == "40001"
    assert rows(env, "t") == Counter({(2, "two"): 1}) and rows(env, "u") == Counter()


def test_transaction_commits_several_tables_at_one_timestamp(tables: Environment) -> None:
    env = tables
    with env.transaction() as tx:
        tx.insert("t", [(3, "three")])
        tx.update("t", [((3, "three"), (3, "drei"))])  # a row of this same transaction
        tx.delete("t", [(1, "one")])
        tx.insert("u", [(10,), (11,)])
        assert rows(env, "u") == Counter()  # nothing before the commit
    result = env.runtime.oracle.read_ts()
    t_now, u_now = rows(env, "t"), rows(env, "u")
    assert t_now == Counter({(2, "two"): 1, (3, "drei"): 1})
    assert u_now == Counter({(10,): 1, (11,): 1})
    # both tables changed at the same timestamp: just before it, neither had
    tx2 = env.transaction()
    tx2.insert("t", [(4, "vier")])
    tx2.insert("u", [(12,)])
    ts = tx2.commit().timestamp
    assert ts > result
    assert (rows(env, "t", ts - 1), rows(env, "u", ts - 1)) == (t_now, u_now)
    assert rows(env, "t", ts)[(4, "vier")] == 1 and rows(env, "u", ts)[(12,)] == 1


def test_transaction_writes_nothing_on_exception_or_missing_rows(tables: Environment) -> None:
    env = tables

    def failing(write: Callable[[Transaction], object]) -> None:
        with env.transaction() as tx:
            tx.insert("u", [(1,)])
            write(tx)

    def fail(tx: Transaction) -> object:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        failing(fail)
    with pytest.raises(RowsNotFound):  # the table holds the row once
        failing(lambda tx: tx.delete("t", [(1, "one"), (1, "one")]))
    with pytest.raises(SchemaMismatch):  # refused when buffered
        failing(lambda tx: tx.insert("t", [("not a number", "x")]))
    assert rows(env, "u") == Counter()
    assert rows(env, "t") == Counter({(1, "one"): 1, (2, "two"): 1})
    tx = env.transaction()
    tx.rollback()
    with pytest.raises(TransactionClosed):
        tx.insert("u", [(4,)])


def test_a_read_block_dropped_without_an_end_gives_its_holds_up(tables: Environment) -> None:
    env = tables
    table = env.runtime.catalog.get("t").id
    session = env.sql_session()  # a client connection that goes away inside a block
    session.sql("BEGIN; SELECT a FROM t")
    block = session.session.block
    assert block is not None and block.read_ts is not None
    ts = block.read_ts
    del session, block
    gc.collect()
    deadline = time.monotonic() + 30
    while (env.runtime.storage.collection_frontiers(table).since.as_option() or 0) <= ts:
        assert time.monotonic() < deadline
        env.insert("u", [(1,)])
        time.sleep(0.2)


def test_a_transaction_keeps_keys_unique_and_checks_its_rows(env: Environment) -> None:
    """A block's writes and ``env.transaction()`` are held to the tables' constraints as
    single writes are: a duplicate key fails the COMMIT with 23505 and nothing of the block is
    written (the other table neither); a CHECK fails the statement at once (23514)."""
    env.sql("CREATE TABLE k (id bigint PRIMARY KEY, v bigint CHECK (v >= 0))")
    env.sql("CREATE TABLE other (a bigint)")
    env.sql("INSERT INTO k VALUES (1, 10)")
    env.sql("BEGIN; INSERT INTO other VALUES (7); INSERT INTO k VALUES (2, 20), (1, 30)")
    with pytest.raises(ConstraintViolation, match="duplicate key value") as dup:
        env.sql("COMMIT")
    assert dup.value.sqlstate == "23505"
    assert rows(env, "k") == Counter({(1, 10): 1})
    assert rows(env, "other") == Counter()
    env.sql("BEGIN")
    with pytest.raises(ConstraintViolation) as check:
        env.sql("INSERT INTO k VALUES (3, -1)")
    assert check.value.sqlstate == "23514"
    env.sql("ROLLBACK")
    tx = env.transaction()
    tx.insert("other", [(8,)])
    tx.insert("k", [(1, 5)])
    with pytest.raises(ConstraintViolation, match="duplicate key value") as dup_api:
        tx.commit()
    assert dup_api.value.sqlstate == "23505"
    assert rows(env, "k") == Counter({(1, 10): 1})
    assert rows(env, "other") == Counter()
