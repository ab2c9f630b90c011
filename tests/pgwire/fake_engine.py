"""A small in-memory engine for protocol tests (a double: unit tests only)."""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal

import pyarrow as pa

from spate.errors import UsageError
from spate.pgwire.engine import Context, Described, Relation, Result, Rows, Stream
from spate.pgwire.types import field_with_type
from spate.sql.session_statements import Set


class Located(UsageError, ValueError):
    """An error that points into the statement (as the SQL front end's errors do)."""

    sqlstate = "42703"

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message}\n(caret at {position})")
        self.message = message
        self.position = position
        self.hint = "check the column name"


class NoSuchTable(UsageError, KeyError):
    sqlstate = "42P01"

    def __str__(self) -> str:
        return str(self.args[0])


REPLICAS = pa.schema([pa.field("replica", pa.string(), nullable=False), ("healthy", pa.bool_())])

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("price", pa.float64()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("flag", pa.bool_()),
        pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("data", pa.binary()),
        pa.field("doc", pa.string(), metadata={b"spate.type": b"jsonb"}),
    ]
)


def rows(n: int = 100) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "name": None if i % 10 == 3 else f"name {i}",
            "price": i * 1.5,
            "amount": Decimal(i * 100 + 7).scaleb(-2),
            "flag": i % 2 == 0,
            "day": dt.date(2020, 1, 1) + dt.timedelta(days=i),
            "ts": dt.datetime(2021, 2, 3, 4, 5, 6, 123400) + dt.timedelta(seconds=i),
            "data": bytes([i % 256, 0, 255]),
            "doc": f'{{"k": {i}}}',
        }
        for i in range(n)
    ]


class FakeEngine:
    def __init__(self, n: int = 100) -> None:
        self.table = pa.Table.from_pylist(rows(n), schema=SCHEMA)
        self.streams_open = 0
        self.executed: list[str] = []
        self.set: list[tuple[str | None, str | None]] = []
        self.stopped: list[float] = []
        """Seconds each SLEEP ran before its cancel event stopped it."""
        self._lock = threading.Lock()

    def relations(self) -> Sequence[Relation]:
        return [
            Relation(20001, "t", "table", SCHEMA),
            Relation(20002, "v", "materialized view", pa.schema([("id", pa.int64())])),
            Relation(
                20003, "v_by_id", "index", pa.schema([("id", pa.int64())]), on="v", key=("id",)
            ),
            # spate's own relations; one has a user relation's name, as a user may choose
            Relation(15004, "replicas", "source", REPLICAS, namespace="spate_catalog"),
            Relation(
                15020, "t", "source", pa.schema([("x", pa.int64())]), namespace="spate_catalog"
            ),
        ]

    def describe(self, sql: str, param_oids: Sequence[int], ctx: Context) -> Described:
        n = len(set(re.findall(r"\$(\d+)", sql)))
        oids = tuple(20 if re.search(rf"id\s*=\s*\${i + 1}\b", sql) else 0 for i in range(n))
        s = sql.strip().upper()
        if s.startswith("SUBSCRIBE"):
            return Described(oids, _stream_schema())
        if s.startswith(("SELECT", "WITH", "SHOW")):
            bound = re.sub(r"\$\d+", "NULL", sql)
            result = self.execute(bound, ctx)
            assert isinstance(result, Rows)
            return Described(oids, None if result.table is None else result.table.schema)
        return Described(oids, None)

    def set_variable(self, stmt: Set, ctx: Context) -> None:
        """A SET of one of the engine's variables: a cluster named ``nowhere`` is refused."""
        self.set.append((stmt.name, stmt.value))
        if stmt.value == "nowhere":
            raise NoSuchTable("unknown cluster 'nowhere'")

    def execute(self, sql: str, ctx: Context) -> Result:
        self.executed.append(sql)
        s = " ".join(sql.split())
        m = re.fullmatch(r"SELECT \* FROM t WHERE id = (.+)", s, re.I)
        if m:
            value = m.group(1)
            if value.upper() == "NULL":
                t = self.table.slice(0, 0)
            else:
                key = int(re.sub(r"[^\d-]", "", value))
                t = self.table.filter(pa.compute.equal(self.table["id"], key))
            return Rows(t, f"SELECT {t.num_rows}")
        if re.fullmatch(r"SELECT pg_advisory_unlock_all\(\);?", s, re.I):  # asyncpg's pool reset
            return Rows(pa.table({"pg_advisory_unlock_all": [""]}), "SELECT 1")
        if re.fullmatch(r"SELECT \* FROM t", s, re.I):
            return Rows(self.table, f"SELECT {self.table.num_rows}")
        m = re.fullmatch(r"SELECT (.+?)(?: AS (\w+))?", s, re.I)
        if m and not re.search(r"\bFROM\b", s, re.I):
            value = m.group(1)
            name = m.group(2) or "?column?"
            if re.fullmatch(r"-?\d+", value):
                return Rows(pa.table({name: pa.array([int(value)], pa.int64())}), "SELECT 1")
            lit = re.fullmatch(r"'(.*)'", value)
            if lit:
                return Rows(pa.table({name: [lit.group(1)]}), "SELECT 1")
            if value.upper() == "NULL":
                return Rows(pa.table({name: pa.array([None], pa.string())}), "SELECT 1")
        m = re.fullmatch(r"SELECT (\w+) FROM t", s, re.I)
        if m and m.group(1) not in SCHEMA.names:
            raise Located(f'column "{m.group(1)}" does not exist', sql.index(m.group(1)) + 1)
        m = re.fullmatch(r"SLEEP (\d+(?:\.\d+)?)", s, re.I)
        if m:
            deadline = time.monotonic() + float(m.group(1))
            canceled = ctx.canceled  # this call's (see Context)
            started = time.monotonic()
            while time.monotonic() < deadline and not canceled.is_set():
                time.sleep(0.01)
            if canceled.is_set():
                self.stopped.append(time.monotonic() - started)
            return Rows(None, "SLEEP")
        if s.upper().startswith("SUBSCRIBE"):
            return self._subscribe(s)
        if s.upper().startswith("CREATE TABLE"):
            return Rows(None, "CREATE TABLE")
        if s.upper().startswith("INSERT"):
            return Rows(None, "INSERT 0 1")
        if s.upper().startswith("SELECT") and re.search(r"FROM (\w+)", s, re.I):
            name = re.search(r"FROM (\w+)", s, re.I).group(1)  # type: ignore[union-attr]
            raise NoSuchTable(f'relation "{name}" does not exist')
        raise UsageError(f"the fake engine does not understand {s!r}")

    def _subscribe(self, s: str) -> Stream:
        interval = 0.05
        m = re.search(r"EVERY (\d+(?:\.\d+)?)", s, re.I)
        if m:
            interval = float(m.group(1))
        with self._lock:
            self.streams_open += 1
        closed = threading.Event()

        width = 200 if re.search(r"\bBIG\b", s, re.I) else 1

        def batches() -> Iterator[pa.Table]:
            i = 0
            while True:
                time.sleep(interval)
                yield pa.table(
                    {"mz_timestamp": [1000 + i] * width, "mz_diff": [1] * width, "id": [i] * width},
                    schema=_stream_schema(),
                )
                i += 1

        def close() -> None:
            if not closed.is_set():
                closed.set()
                with self._lock:
                    self.streams_open -= 1

        return Stream(_stream_schema(), batches(), close)


def _stream_schema() -> pa.Schema:
    return pa.schema(
        [
            field_with_type("mz_timestamp", "numeric", pa.int64()),
            pa.field("mz_diff", pa.int64()),
            pa.field("id", pa.int64()),
        ]
    )
