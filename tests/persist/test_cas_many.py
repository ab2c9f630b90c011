"""The batched compare-and-set beyond the conformance suite: SQLite's one transaction, the
unreliable wrapper, and the per-op fallback for a Consensus without a batched call."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spate.errors import Determinate, Indeterminate
from spate.persist.consensus import CasOp, VersionedData, compare_and_set_many
from spate.persist.consensus_mem import MemConsensus
from spate.persist.consensus_sqlite import SqliteConsensus
from spate.persist.unreliable import Faults, UnreliableConsensus


def test_sqlite_batch_is_one_begin_and_one_commit(tmp_path: Path) -> None:
    c = SqliteConsensus(tmp_path / "c.db")
    statements: list[str] = []
    c._conn.set_trace_callback(statements.append)
    try:
        assert c.compare_and_set_many([CasOp(f"k{i}", None, b"x") for i in range(4)]) == [True] * 4
    finally:
        c._conn.set_trace_callback(None)
    assert statements.count("BEGIN IMMEDIATE") == 1
    assert statements.count("COMMIT") == 1
    assert sum(s.startswith("INSERT") for s in statements) == 4
    # another connection sees all of them
    other = SqliteConsensus(tmp_path / "c.db")
    assert [other.head(f"k{i}") for i in range(4)] == [VersionedData(0, b"x")] * 4
    other.close()
    c.close()


@pytest.mark.parametrize("fault", ["fail", "timeout_before", "timeout_after"])
def test_unreliable_batch_runs_whole_or_not_at_all(fault: str) -> None:
    inner = MemConsensus()
    faults = Faults(**{k: (1.0 if k == fault else 0.0) for k in Faults.__dataclass_fields__})
    c = UnreliableConsensus(inner, random.Random(0), faults)
    ops = [CasOp("a", None, b"1"), CasOp("b", None, b"1")]
    expected_error = Determinate if fault == "fail" else Indeterminate
    with pytest.raises(expected_error):
        c.compare_and_set_many(ops)
    ran = fault == "timeout_after"
    assert (inner.head("a") is not None, inner.head("b") is not None) == (ran, ran)
    assert c.counts[fault] == 1


class _SinglesOnly:
    """A Consensus double with only the single compare-and-set; the ``n``-th one fails."""

    def __init__(self, fail_at: int | None) -> None:
        self.inner = MemConsensus()
        self.fail_at = fail_at
        self.calls = 0

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        self.calls += 1
        if self.calls == self.fail_at:
            raise Determinate("injected")
        return self.inner.compare_and_set(key, expected, data)


def test_fallback_without_a_batched_call_runs_each_op() -> None:
    c = _SinglesOnly(fail_at=None)
    assert c.inner.compare_and_set("b", None, b"0")
    ops = [CasOp("a", None, b"1"), CasOp("b", None, b"1")]
    assert compare_and_set_many(c, ops) == [True, False]


def test_fallback_error_after_an_op_ran_is_indeterminate() -> None:
    with pytest.raises(Determinate) as first:
        compare_and_set_many(_SinglesOnly(fail_at=1), [CasOp("a", None, b"1")])
    assert not isinstance(first.value, Indeterminate)
    with pytest.raises(Indeterminate):
        compare_and_set_many(
            _SinglesOnly(fail_at=2), [CasOp("a", None, b"1"), CasOp("b", None, b"1")]
        )
