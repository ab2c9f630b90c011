"""PRIMARY KEY, UNIQUE, NOT NULL, CHECK and DEFAULT on every write path (SQL INSERT and
UPDATE, ``env.insert``/``env.update`` with rows and Arrow, pipelined and concurrent writers),
each failing statement checked against PostgreSQL's SQLSTATE, message and detail for the same
statements, and against PostgreSQL's table contents after it (a failed statement changes
nothing). No replicas: the constraints are checked by the group committer."""

from __future__ import annotations

import random
import threading
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.environment.catalog import CheckConstraint, UniqueConstraint
from spate.errors import (
    CheckViolation,
    ConstraintViolation,
    NotNullViolation,
    SchemaMismatch,
    UniqueViolation,
)
from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef, Literal
from spate.repr import INT64, TEXT, RelationDesc

# (setup, failing statement): PostgreSQL and spate must fail alike and keep the same rows.
CASES = [
    pytest.param(
        "CREATE TABLE t (k int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')",
        "INSERT INTO t VALUES (2, 'b'), (1, 'c')",
        id="pkey-existing",
    ),
    pytest.param(
        "CREATE TABLE t (k int PRIMARY KEY, v text)",
        "INSERT INTO t VALUES (5, 'a'), (6, 'b'), (5, 'c')",
        id="pkey-within-one-statement",
    ),
    pytest.param(
        "CREATE TABLE t (k int, v text UNIQUE); INSERT INTO t VALUES (1, 'x'), (2, NULL)",
        "INSERT INTO t VALUES (3, NULL), (4, 'x')",  # NULLs never collide
        id="unique-column",
    ),
    pytest.param(
        "CREATE TABLE t (a int, b int, c text, PRIMARY KEY (a, b)); INSERT INTO t VALUES (1, 2, 'x')",
        "INSERT INTO t VALUES (2, 1, 'y'), (1, 2, 'y')",
        id="pkey-composite",
    ),
    pytest.param(
        "CREATE TABLE t (a int, b text, CONSTRAINT ab UNIQUE (a, b)); INSERT INTO t VALUES (1, 'q')",
        "INSERT INTO t VALUES (1, 'q')",
        id="unique-named-table-form",
    ),
    pytest.param(
        "CREATE TABLE t (name text PRIMARY KEY, n int); INSERT INTO t VALUES ('ann', 1)",
        "INSERT INTO t VALUES ('ann', 2)",
        id="pkey-text",
    ),
    pytest.param(
        "CREATE TABLE t (k int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a'), (2, 'b')",
        "UPDATE t SET k = 1 WHERE k = 2",
        id="update-pkey",
    ),
    pytest.param(
        "CREATE TABLE t (k int PRIMARY KEY, v text UNIQUE); INSERT INTO t VALUES (1, 'a'), (2, 'b')",
        "UPDATE t SET v = 'same'",
        id="update-unique-two-rows",
    ),
    pytest.param(
        "CREATE TABLE t (k int PRIMARY KEY, v text)",
        "INSERT INTO t VALUES (NULL, 'a')",
        id="pkey-not-null",
    ),
    pytest.param(
        "CREATE TABLE t (k int NOT NULL, v text)",
        "INSERT INTO t (v) VALUES ('a')",
        id="not-null-left-out",
    ),
    pytest.param(
        "CREATE TABLE t (k int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')",
        "UPDATE t SET k = NULL",
        id="update-not-null",
    ),
    pytest.param(
        "CREATE TABLE t (k int, v int CHECK (v > 0))",
        "INSERT INTO t VALUES (1, 1), (2, 0)",
        id="check-column",
    ),
    pytest.param(
        "CREATE TABLE t (a int, b int, CHECK (a < b))",
        "INSERT INTO t VALUES (2, 1)",
        id="check-table-two-columns",
    ),
    pytest.param(
        "CREATE TABLE t (a int, b int, CHECK (b > 0), CHECK (b < 10))",
        "INSERT INTO t VALUES (1, 10)",
        id="check-names-numbered",
    ),
    pytest.param(
        "CREATE TABLE t (a int, CONSTRAINT positive CHECK (a > 0))",
        "INSERT INTO t VALUES (NULL), (-1)",  # NULL passes a check
        id="check-named",
    ),
    pytest.param(
        "CREATE TABLE t (k int PRIMARY KEY, v int CHECK (v >= 0)); INSERT INTO t VALUES (1, 1)",
        "UPDATE t SET v = v - 5",
        id="update-check",
    ),
    pytest.param(
        "",
        "CREATE TABLE t (a int PRIMARY KEY, b int PRIMARY KEY)",
        id="two-primary-keys",
    ),
]


def _pg_outcome(url: str, setup: str, statement: str) -> tuple[tuple[str, str, str | None], Any]:
    import psycopg

    schema = f"keys_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            for s in filter(str.strip, setup.split(";")):
                conn.execute(s)
            with pytest.raises(psycopg.Error) as e:
                conn.execute(statement)
            diag = e.value.diag
            assert diag.sqlstate is not None and diag.message_primary is not None
            found = (diag.sqlstate, diag.message_primary, diag.message_detail)
            exists = conn.execute("SELECT to_regclass('t')").fetchone()
            rows = None
            if exists is not None and exists[0] is not None:
                rows = sorted(conn.execute("SELECT * FROM t").fetchall(), key=repr)
            return found, rows
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.parametrize(("setup", "statement"), CASES)
def test_a_violation_fails_as_in_postgresql_and_changes_nothing(
    env: Environment, postgres_url: str, setup: str, statement: str
) -> None:
    expected, pg_rows = _pg_outcome(postgres_url, setup, statement)
    if setup:
        env.sql(setup)
    with pytest.raises(Exception) as e:  # noqa: PT011 - compared field by field below
        env.sql(statement)
    got = (
        getattr(e.value, "sqlstate", None),
        getattr(e.value, "message", str(e.value)),
        getattr(e.value, "detail", None),
    )
    assert got == expected
    if pg_rows is not None:
        spate_rows = [tuple(r.values()) for r in env.sql("SELECT * FROM t").to_pylist()]
        assert sorted(spate_rows, key=repr) == pg_rows


def test_constraints_are_named_as_postgresql_names_them(env: Environment) -> None:
    env.sql(
        "CREATE TABLE t (k int PRIMARY KEY, v text UNIQUE, w int CHECK (w > 0) CHECK (w < 9), "
        "UNIQUE (v, w), CHECK (k < w), CHECK (1 > 0), CONSTRAINT mine CHECK (k <> 3))"
    )
    names = [c.name for c in env.runtime.catalog.get("t").constraints]  # type: ignore[union-attr]
    assert names == [
        "t_pkey",
        "t_v_key",
        "t_v_w_key",
        "t_w_check",
        "t_w_check1",
        "t_check",
        "t_check1",
        "mine",
    ]
    desc = env.runtime.catalog.get("t").desc  # type: ignore[union-attr]
    assert [c.nullable for c in desc.columns] == [False, True, True]


BATCH = 10_000


@pytest.mark.parametrize("form", ["rows", "arrow"])
def test_a_batch_whose_last_row_is_a_duplicate_writes_nothing(env: Environment, form: str) -> None:
    env.sql("CREATE TABLE t (k bigint PRIMARY KEY, v text)")
    env.insert("t", [(0, "first")])
    rows = [(i, "r") for i in range(1, BATCH)] + [(0, "again")]  # the 10,000th row
    data: Any = (
        rows if form == "rows" else pa.table({"k": [r[0] for r in rows], "v": ["r"] * BATCH})
    )
    with pytest.raises(UniqueViolation) as e:
        env.insert("t", data)
    assert e.value.sqlstate == "23505"
    assert str(e.value) == 'duplicate key value violates unique constraint "t_pkey"'
    assert e.value.detail == "Key (k)=(0) already exists."
    assert env.select("t").num_rows == 1
    # a duplicate within the batch itself, at its end
    rows = [(i, "r") for i in range(1, BATCH)] + [(BATCH - 1, "twice")]
    with pytest.raises(UniqueViolation, match="t_pkey") as e:
        env.insert("t", rows)
    assert e.value.detail == f"Key (k)=({BATCH - 1}) already exists."
    assert env.select("t").num_rows == 1
    env.insert("t", rows[:-1])  # without it, the batch goes in
    assert env.select("t").num_rows == BATCH


def test_sql_insert_select_of_ten_thousand_rows_with_a_duplicate_writes_nothing(
    env: Environment,
) -> None:
    env.sql("CREATE TABLE src (k bigint, v text)")
    env.insert("src", [(i, "s") for i in range(1, BATCH)] + [(7, "dup")])
    env.sql("CREATE TABLE t (k bigint PRIMARY KEY, v text)")
    with pytest.raises(UniqueViolation, match="t_pkey"):
        env.sql("INSERT INTO t SELECT k, v FROM src")
    assert env.select("t").num_rows == 0


def test_concurrent_writers_of_one_key_exactly_one_wins(env: Environment, seed: int) -> None:
    rng = random.Random(seed)
    env.sql("CREATE TABLE t (k int PRIMARY KEY, who text)")
    # pipelined: every write of the same key is in one or a few groups
    n = rng.randrange(5, 20)
    p = env.pipeline()
    pending = [p.insert("t", [(1, f"p{i}")]) for i in range(n)]
    outcomes = []
    for w in pending:
        try:
            w.result()
            outcomes.append(True)
        except UniqueViolation:
            outcomes.append(False)
    assert outcomes == [True] + [False] * (n - 1)  # the first submitted wins
    # threads, released at once
    threads = rng.randrange(4, 9)
    barrier = threading.Barrier(threads)
    wins: list[int] = []
    losses: list[BaseException] = []

    def writer(i: int) -> None:
        barrier.wait()
        try:
            env.insert("t", [(2, f"t{i}")])
            wins.append(i)
        except UniqueViolation as e:
            losses.append(e)

    ts = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(wins) == 1 and len(losses) == threads - 1
    rows = sorted(tuple(r.values()) for r in env.select("t").to_pylist())
    assert rows == [(1, "p0"), (2, f"t{wins[0]}")]


def test_python_api_update_and_arrow_insert_are_checked(env: Environment) -> None:
    env.create_table(
        "t",
        RelationDesc.of(("k", INT64), ("v", TEXT)),
        constraints=[
            UniqueConstraint("t_pkey", ("k",), primary=True),
            CheckConstraint(
                "t_k_check", CallBinary(BinaryFunc.GT, ColumnRef(0), Literal(0, INT64)), "k > 0"
            ),
        ],
    )
    env.insert("t", [(1, "a"), (2, "b")])
    with pytest.raises(UniqueViolation, match="t_pkey"):
        env.update("t", [((2, "b"), (1, "b"))])
    env.update("t", [((1, "a"), (2, "x")), ((2, "b"), (1, "y"))])  # a swap keeps keys unique
    with pytest.raises(NotNullViolation) as nn:
        env.insert("t", pa.table({"k": pa.array([3, None], pa.int64()), "v": ["c", "d"]}))
    assert nn.value.sqlstate == "23502"
    assert nn.value.detail == "Failing row contains (null, d)."
    assert isinstance(nn.value, SchemaMismatch)  # and still what it was before
    with pytest.raises(CheckViolation, match='violates check constraint "t_k_check"'):
        env.insert("t", pa.table({"k": pa.array([5, -1], pa.int64()), "v": ["c", "d"]}))
    with pytest.raises(ConstraintViolation):
        env.update("t", [((1, "y"), (0, "y"))])
    assert sorted(tuple(r.values()) for r in env.select("t").to_pylist()) == [(1, "y"), (2, "x")]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_constraints_survive_reopening(data_dir: Path) -> None:
    with Environment.open(data_dir) as env:
        env.sql("CREATE TABLE t (k int PRIMARY KEY, v int CHECK (v > 0))")
        env.sql("INSERT INTO t VALUES (1, 1), (2, 2)")
    with Environment.open(data_dir) as env:
        with pytest.raises(UniqueViolation, match="t_pkey"):
            env.sql("INSERT INTO t VALUES (2, 5)")  # the table is read back, then probed
        with pytest.raises(CheckViolation, match="t_v_check"):
            env.sql("INSERT INTO t VALUES (3, -5)")
        env.sql("INSERT INTO t VALUES (3, 3)")
        assert env.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 3}]


def test_defaults_fill_left_out_columns_at_write_time(env: Environment, postgres_url: str) -> None:
    import psycopg

    create = "CREATE TABLE t (k int PRIMARY KEY, v text DEFAULT 'none', n int DEFAULT 7)"
    inserts = [
        "INSERT INTO t (k) VALUES (1)",
        "INSERT INTO t VALUES (2, DEFAULT, 3)",
        "INSERT INTO t VALUES (3)",
        "INSERT INTO t (k, n) SELECT 4, 8",
    ]
    env.sql(create)
    for s in inserts:
        env.sql(s)
    got = sorted(tuple(r.values()) for r in env.sql("SELECT * FROM t").to_pylist())
    schema = f"keys_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute(create)
            for s in inserts:
                conn.execute(s)
            assert got == sorted(conn.execute("SELECT * FROM t").fetchall())
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    env.sql("CREATE TABLE s (k int, at timestamp DEFAULT now())")
    env.sql("INSERT INTO s (k) VALUES (1)")
    (row,) = env.sql("SELECT at IS NOT NULL AS set FROM s").to_pylist()
    assert row == {"set": True}


def test_create_unique_index_checks_the_rows_there_as_postgresql_does(
    env: Environment, postgres_url: str
) -> None:
    import psycopg

    setup = ["CREATE TABLE t (k int, v text)", "INSERT INTO t VALUES (1, 'a'), (2, 'a')"]
    schema = f"keys_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            for s in setup:
                conn.execute(s)
            with pytest.raises(psycopg.Error) as pg:
                conn.execute("CREATE UNIQUE INDEX t_v ON t (v DESC)")
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    env.create_cluster("c", replicas=0)  # the index is only in the catalog: no process
    for s in setup:
        env.sql(s)
    with pytest.raises(UniqueViolation) as e:
        env.sql("CREATE UNIQUE INDEX t_v IN CLUSTER c ON t (v DESC)")
    diag = pg.value.diag
    assert (e.value.sqlstate, str(e.value), e.value.detail) == (
        diag.sqlstate,
        diag.message_primary,
        diag.message_detail,
    )
    assert "t_v" not in env.names()
    assert env.runtime.catalog.get("t").constraints == ()  # type: ignore[union-attr]
    env.sql("CREATE UNIQUE INDEX t_k IN CLUSTER c ON t (k)")
    with pytest.raises(UniqueViolation, match='"t_k"'):
        env.sql("INSERT INTO t VALUES (2, 'b')")
    env.sql("DROP INDEX t_k")  # the constraint goes with it
    env.sql("INSERT INTO t VALUES (2, 'b')")
    assert env.runtime.catalog.get("t").constraints == ()  # type: ignore[union-attr]


def test_a_table_stored_before_constraints_existed_decodes_without_them() -> None:
    import msgpack

    from spate.codec import decode, encode
    from spate.environment.catalog import TableItem
    from spate.ids import GlobalId

    item = TableItem("t", GlobalId.user(1), RelationDesc.of(("k", INT64)))
    tag, version, fields = msgpack.unpackb(encode(item), raw=False, strict_map_key=False)
    del fields["constraints"]  # as a catalog written before the field was added holds it
    old = msgpack.packb([tag, version, fields], use_bin_type=True)
    assert decode(old, TableItem) == item
    fields["nonsense"] = 1  # an unknown field is still refused
    with pytest.raises(Exception, match="unexpected field"):
        decode(msgpack.packb([tag, version, fields], use_bin_type=True), TableItem)
