"""Bad input to the public API raises a ``SpateError`` that also is the matching built-in
(``TypeError``, ``ValueError``, ``TimeoutError``…) and names what was wrong; never a bare
built-in from deep inside. A damaged consensus database is reported as such."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import SpateError
from spate.protocol.storage_desc import (
    FileFormat,
    FileSource,
    LoadGenerator,
    LoadGeneratorSource,
    ParquetSinkConnection,
)
from spate.repr import INT64, JSONB, TEXT, RelationDesc

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT), ("j", JSONB))

CASES: dict[str, tuple[Callable[[Environment], object], type[BaseException], str]] = {
    "lone surrogate in text": (
        lambda e: e.insert("t", [(1, "\ud800", None)]),
        TypeError,
        "not valid UTF-8",
    ),
    "jsonb NaN": (lambda e: e.insert("t", [(1, None, "NaN")]), TypeError, "not valid JSON"),
    "jsonb NUL": (lambda e: e.insert("t", [(1, None, '"a\\u0000"')]), TypeError, "NUL"),
    "int64 overflow": (lambda e: e.insert("t", [(2**70, None, None)]), TypeError, "int64"),
    "rows not iterable": (lambda e: e.insert("t", 5), TypeError, "rows"),
    "update pairs not iterable": (lambda e: e.update("t", 5), TypeError, "pairs"),
    "delete where not a dict": (lambda e: e.delete("t", where=5), TypeError, "where"),
    "as_of beyond any timestamp": (lambda e: e.select("t", as_of=2**70), ValueError, "as_of"),
    "as_of not an int": (lambda e: e.select("t", as_of="x"), TypeError, "as_of"),
    "limit not an int": (lambda e: e.select("t", limit="x"), TypeError, "limit"),
    "order_by a string": (lambda e: e.select("t", order_by="k"), TypeError, "order_by"),
    "negative timeout": (lambda e: e.select("t", timeout=-1), ValueError, "timeout"),
    "subscribe as_of not an int": (
        lambda e: next(e.subscribe("t", as_of="x")),
        TypeError,
        "as_of",
    ),
    "negative replica count": (
        lambda e: e.create_cluster("c", replicas=-1),
        ValueError,
        "replicas",
    ),
    "file source over a missing directory": (
        lambda e: e.create_source(
            "f", FileSource("/nonexistent/dir", FileFormat.PARQUET), desc=DESC
        ),
        ValueError,
        "not one",
    ),
    "file source format as a string": (
        lambda e: e.create_source("f", FileSource("/tmp", "parquet"), desc=DESC),  # type: ignore[arg-type]
        TypeError,
        "format",
    ),
    "negative load generator tick": (
        lambda e: LoadGeneratorSource(LoadGenerator.COUNTER, tick_interval_ms=-5),
        ValueError,
        "tick_interval_ms",
    ),
    "parquet sink directory not a string": (
        lambda e: e.create_sink("s", from_="t", connection=ParquetSinkConnection(5)),  # type: ignore[arg-type]
        TypeError,
        "directory",
    ),
    "read that is never answered": (
        lambda e: e.select("t", as_of=2**62, timeout=0.5),
        TimeoutError,
        "t",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_a_spate_error_that_is_also_the_builtin(tmp_path: Path, case: str) -> None:
    call, builtin, message = CASES[case]
    with Environment.open(tmp_path / "data") as env:
        env.create_table("t", DESC)
        env.insert("t", [(1, "a", "{}")])
        with pytest.raises(SpateError, match=message) as e:
            call(env)
        assert isinstance(e.value, builtin), type(e.value).__mro__
        assert env.select("t").num_rows == 1
        assert [c.name for c in env.status().replicas] == []


def test_a_damaged_consensus_database_is_reported_as_damaged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("t", DESC)
    conn = sqlite3.connect(data / "consensus.db")
    conn.execute("update consensus set data = x'deadbeef'")
    conn.commit()
    conn.close()
    with pytest.raises(SpateError, match="damaged") as e:
        Environment.open(data)
    assert "ProtocolError" not in type(e.value).__name__

    from spate.environment.inspect import inspect_environment

    with pytest.raises(SpateError, match="damaged"):
        inspect_environment(data)


def test_a_call_that_runs_out_of_time_raises_a_spate_timeout(tmp_path: Path) -> None:
    from spate.errors import CallTimeout

    with Environment.open(tmp_path / "data") as env:
        env.create_table("t", DESC)

        async def slow() -> None:
            import asyncio

            await asyncio.sleep(5)

        with pytest.raises(CallTimeout) as e:
            env._run(slow(), 0.2)
        assert isinstance(e.value, TimeoutError)
