"""What a subscribe yields: rows named by their columns, and no empty batches for quiet
intervals unless progress is asked for (then each empty batch's ``upper`` moves on)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.environment.changes import Change, Changes, changes_of, row_type
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


def test_changes_are_named_sorted_by_time_and_compare_as_plain_tuples() -> None:
    updates = pa.table({"k": [2, 1], "v": ["b", None], TIME_COLUMN: [7, 5], DIFF_COLUMN: [1, -1]})
    changes = changes_of(updates, DESC, row_type(DESC), upper=8)
    assert isinstance(changes, Changes) and changes.upper == 8
    assert changes == [(5, (1, None), -1), (7, (2, "b"), 1)]
    first = changes[0]
    assert isinstance(first, Change) and first.row.k == 1 and first.row.v is None
    assert first.time == 5 and first.diff == -1
    odd = RelationDesc.of(("class", INT64, False), ("two words", TEXT))
    row = row_type(odd)._make((1, "x"))  # type: ignore[attr-defined]
    assert row == (1, "x") and row._0 == 1 and row._1 == "x"
    assert changes_of(None, DESC, row_type(DESC), upper=3) == []


def test_changes_keep_nulls_intervals_and_rows_without_columns() -> None:
    """An int column with NULLs, an interval column (made ``timedelta``-like values), a relation
    of no columns: each row as ``to_pylist`` gives it, in named tuples, sorted by time."""
    from spate.repr.types import INTERVAL

    desc = RelationDesc.of(("k", INT64, True), ("i", INTERVAL, True))
    iv = pa.array([(1, 2, 3), None], pa.month_day_nano_interval())
    updates = pa.table({"k": [None, 4], "i": iv, TIME_COLUMN: [3, 3], DIFF_COLUMN: [2, -1]})
    changes = changes_of(updates, desc, row_type(desc), upper=4)
    assert [c.row.k for c in changes] == [None, 4] and changes[1].row.i is None
    assert changes[0].row.i is not None and changes[0].diff == 2
    empty = RelationDesc.of()
    none = pa.table({TIME_COLUMN: [2, 1], DIFF_COLUMN: [1, 3]})
    got = changes_of(none, empty, row_type(empty), upper=5)
    assert got == [(1, (), 3), (2, (), 1)] and type(got[0]) is Change


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_quiet_intervals_are_skipped_unless_progress_is_asked_for(cluster_env: Environment) -> None:
    env = cluster_env
    env.create_table("t", DESC)
    env.insert("t", [(1, "a")])

    quiet = env.subscribe("t", cluster="c", timeout=120)
    (snapshot,) = next(quiet)
    assert snapshot.row.k == 1 and snapshot.row.v == "a" and snapshot.diff == 1
    time.sleep(3.0)  # the table's upper advances every second: quiet intervals close
    env.insert("t", [(2, "b")])
    nxt = next(quiet)
    assert [(c.row.k, c.row.v, c.diff) for c in nxt] == [(2, "b", 1)]
    quiet.close()

    ticking = env.subscribe("t", cluster="c", timeout=120, progress=True)
    assert len(next(ticking)) == 2
    uppers = []
    while len(uppers) < 3:
        batch = next(ticking)
        assert batch == []  # nothing was written
        uppers.append(batch.upper)
    assert all(u is not None for u in uppers)
    assert uppers == sorted(uppers) and len(set(uppers)) == 3
    ticking.close()

    with pytest.raises(TypeError, match="progress"):
        next(env.subscribe("t", cluster="c", progress="yes"))  # type: ignore[arg-type]
