"""Key lookups served by pyarrow (no Spark): exact or superset matches, NULL handling, the
columns a lookup may use, and arrangements serving them across appends and merges."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.render.arrangement import Arrangement
from spate.render.batch import Batch, EngineSettings
from spate.render.key_index import KeyIndex
from spate.render.lookup import lookup_columns, semi_join
from spate.repr import FLOAT64, INT64, JSONB, TEXT, RelationDesc, numeric


def test_one_column_lookup_matches_null_only_when_null_safe() -> None:
    table = pa.table({"c0": [1, 2, None, 3, 1], "v": ["a", "b", "n", "c", "d"]})
    keys = pa.table({"k": [1, None]})
    safe = semi_join(table, ["c0"], keys, null_safe=True)
    assert safe is not None
    assert sorted(safe.column("v").to_pylist()) == ["a", "d", "n"]
    plain = semi_join(table, ["c0"], keys, null_safe=False)
    assert plain is not None
    assert sorted(plain.column("v").to_pylist()) == ["a", "d"]


def test_multi_column_lookup_and_key_types_cast_to_the_table() -> None:
    table = pa.table(
        {
            "a": pa.array([1, 1, 2, 2], pa.int64()),
            "b": pa.array([Decimal("1.50"), Decimal("2.00"), Decimal("1.50"), None]),
            "v": [10, 20, 30, 40],
        }
    )
    keys = pa.table({"x": pa.array([1, 2], pa.int32()), "y": [Decimal("1.50"), None]})
    out = semi_join(table, ["a", "b"], keys, null_safe=False)
    assert out is not None
    assert out.column("v").to_pylist() == [10]


def test_incomparable_key_types_leave_the_lookup_to_spark() -> None:
    table = pa.table({"c0": pa.array([1, 2], pa.int64())})
    keys = pa.table({"k": pa.array(["x"], pa.string())})
    assert semi_join(table, ["c0"], keys, null_safe=True) is None


def test_lookup_columns_skip_floats_jsonb_and_nullable_multi_column_keys() -> None:
    desc = RelationDesc.of(
        ("a", INT64, True),
        ("b", FLOAT64, False),
        ("c", TEXT, False),
        ("d", JSONB, False),
        ("e", numeric(10, 2), False),
    )
    assert lookup_columns(desc, [1, 3], null_safe=True) == []
    assert lookup_columns(desc, [0], null_safe=True) == [0]
    # several columns: only the non-nullable ones (a NULL-safe multi-column match is not
    # possible in pyarrow), and the choice is a subset, so the rows found are a superset
    assert lookup_columns(desc, [0, 1, 2, 4], null_safe=True) == [2, 3]
    assert lookup_columns(desc, [0, 2], null_safe=False) == [0, 1]
    # every usable column nullable: one column, matched NULL-safely
    assert lookup_columns(desc, [0, 0], null_safe=True) == [0]


DESC = RelationDesc.of(("k", INT64, True), ("v", INT64, False))


def _updates(rows: list[tuple[int | None, int, int, int]]) -> pa.Table:
    k, v, t, d = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table(
        {
            "c0": pa.array(k, pa.int64()),
            "c1": pa.array(v, pa.int64()),
            "_time": pa.array(t, pa.int64()),
            "_diff": pa.array(d, pa.int64()),
        }
    )


class _Engine:
    """What an arrangement needs of the engine (no Spark)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.n = 0
        self.settings = EngineSettings()
        self.defer_merges = False

    def fresh(self, what: str) -> Path:
        self.n += 1
        return self.root / f"{what}-{self.n:06d}"

    def spilled(self, table: object) -> Path | None:
        return None  # nothing was written for Spark

    def df_of_files(self, paths: tuple[Path, ...], desc: RelationDesc) -> tuple[Path, ...]:
        return paths  # what Spark would read


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.lists(
            st.tuples(
                st.one_of(st.none(), st.integers(0, 6)),
                st.integers(0, 3),
                st.sampled_from([1, 1, -1, 2]),
            ),
            max_size=12,
        ),
        min_size=1,
        max_size=8,
    ),
    wanted=st.lists(st.one_of(st.none(), st.integers(0, 7)), max_size=4),
    indexed=st.booleans(),
)
def test_arrangement_lookup_equals_filtering_every_update(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[list[tuple[int | None, int, int]]],
    wanted: list[int | None],
    indexed: bool,
) -> None:
    """``indexed``: every batch of 3 rows or more answers through a key index, across
    appends and merges (without NULL keys in the updates, which would make batches be
    scanned)."""
    import spate.render.arrangement as arrangement

    with pytest.MonkeyPatch.context() as mp:
        if indexed:
            mp.setattr(arrangement, "INDEX_MIN_ROWS", 3)
            steps = [[(k, v, d) for k, v, d in step if k is not None] for step in steps]
        _check_lookups(tmp_path_factory.mktemp("arr"), steps, wanted)


def _check_lookups(
    root: Path, steps: list[list[tuple[int | None, int, int]]], wanted: list[int | None]
) -> None:
    arr = Arrangement(_Engine(root), DESC, "t", as_of=0, internal=True)  # type: ignore[arg-type]
    every: list[tuple[int | None, int, int, int]] = []
    for time, step in enumerate(steps):
        rows = [(k, v, time, d) for k, v, d in step]
        every += rows
        table = _updates(rows)
        arr.append(Batch(DESC, table=table, rows=table.num_rows), time + 1)
        keys = pa.table({"k": pa.array(wanted, pa.int64())})
        found = arr.lookup([0], keys, null_safe=True)
        assert found is not None
        got: dict[tuple[int | None, int], int] = {}
        for r in found.to_pylist():
            got[(r["c0"], r["c1"])] = got.get((r["c0"], r["c1"]), 0) + r["_diff"]
        want: dict[tuple[int | None, int], int] = {}
        for k, v, _, d in every:
            if k in wanted:
                want[(k, v)] = want.get((k, v), 0) + d
        assert {k: m for k, m in got.items() if m} == {k: m for k, m in want.items() if m}
        assert len(arr.updates()) == arr.rows


def test_large_arrangements_serve_one_column_lookups_from_their_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spate.render.arrangement as arrangement

    monkeypatch.setattr(arrangement, "LOOKUP_MAX_ROWS", 10)
    arr = Arrangement(_Engine(tmp_path), DESC, "t", as_of=0, internal=True)  # type: ignore[arg-type]
    rows = [(int(k), int(k) * 10, 0, 1) for k in np.arange(20)]
    table = _updates(rows)
    arr.append(Batch(DESC, table=table, rows=table.num_rows), 1)
    assert arr.resident() is None  # beyond the limit: not kept in driver memory
    found = arr.lookup([0], pa.table({"k": [1, 7, 99]}), null_safe=True)
    assert found is not None
    assert sorted(zip(found["c0"].to_pylist(), found["c1"].to_pylist(), strict=True)) == [
        (1, 10),
        (7, 70),
    ]
    # several key columns: Spark reads the arrangement instead
    assert arr.lookup([0, 1], pa.table({"k": [1], "v": [10]}), null_safe=True) is None


def _sums(table: pa.Table) -> dict[tuple[int | None, int, int], int]:
    out: dict[tuple[int | None, int, int], int] = {}
    for r in table.to_pylist():
        key = (r["c0"], r["c1"], r["_time"])
        out[key] = out.get(key, 0) + r["_diff"]
    return {k: d for k, d in out.items() if d}


def test_arrow_appends_write_parquet_only_when_spark_reads_the_arrangement(
    tmp_path: Path,
) -> None:
    arr = Arrangement(_Engine(tmp_path), DESC, "t", as_of=0, internal=False)  # type: ignore[arg-type]
    every = []
    for t in range(6):  # appends and merges, all resident
        rows = [(k, t, t, 1) for k in range(t + 1)]
        every += rows
        table = _updates(rows)
        arr.append(Batch(DESC, table=table, rows=table.num_rows), t + 1)
        found = arr.lookup([0], pa.table({"k": [0, 2]}), null_safe=True)
        assert found is not None and found.num_rows
    assert not list(tmp_path.rglob("*.parquet"))
    paths = arr.df()  # Spark reads the files: every batch is on disk now
    assert isinstance(paths, tuple) and paths
    on_disk = pa.concat_tables(pq.read_table(p) for p in paths)
    assert _sums(on_disk) == _sums(_updates(every)) == _sums(arr.updates())
    arr.append(Batch(DESC, table=_updates([(9, 9, 6, 1)]), rows=1), 7)  # merged with them
    assert _sums(pa.concat_tables(pq.read_table(p) for p in arr.df())) == _sums(
        _updates([*every, (9, 9, 6, 1)])
    )
    arr.drop()
    assert not list(tmp_path.rglob("*.parquet"))


def test_batches_leaving_driver_memory_are_written_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large arrangement keeps only its small batches in memory; the others it reads back
    from their files, which must have been written before they left."""
    import spate.render.arrangement as arrangement

    monkeypatch.setattr(arrangement, "LOOKUP_MAX_ROWS", 12)
    monkeypatch.setattr(arrangement, "INDEX_MIN_ROWS", 4)
    arr = Arrangement(_Engine(tmp_path), DESC, "t", as_of=0, internal=False)  # type: ignore[arg-type]
    every = []
    for t in range(5):
        rows = [(k, t, t, 1) for k in range(8)]
        every += rows
        table = _updates(rows)
        arr.append(Batch(DESC, table=table, rows=table.num_rows), t + 1)
        assert _sums(arr.updates()) == _sums(_updates(every))
    assert arr.resident() is None
    found = arr.lookup([0], pa.table({"k": [3]}), null_safe=True)
    assert found is not None
    assert _sums(found) == _sums(_updates([r for r in every if r[0] == 3]))


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=40),
    wanted=st.lists(st.none() | st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=6),
    kind=st.sampled_from(["int64", "date32", "timestamp"]),
)
def test_key_index_finds_the_rows_a_scan_finds(
    values: list[int], wanted: list[int | None], kind: str
) -> None:
    if kind == "date32":  # days within pyarrow's date range
        values = [v % 100_000 for v in values]
        wanted = [None if w is None else w % 100_000 for w in wanted]
    types = {"int64": pa.int64(), "date32": pa.date32(), "timestamp": pa.timestamp("us")}
    typ = types[kind]
    base = pa.int32() if kind == "date32" else pa.int64()
    column = pa.chunked_array([pa.array(values[:5], base), pa.array(values[5:], base)]).cast(typ)
    index = KeyIndex.build(column)
    assert index is not None
    rows = sorted(index.rows(pa.array(wanted, base).cast(typ)).tolist())
    asked = {w for w in wanted if w is not None}
    assert rows == [i for i, v in enumerate(values) if v in asked]


def test_key_index_refuses_what_it_cannot_sort_exactly() -> None:
    assert KeyIndex.build(pa.array([1, None, 3])) is None  # a NULL: scanned instead
    assert KeyIndex.build(pa.array([1.0, 2.0])) is None
    assert KeyIndex.build(pa.array(["a", "b"])) is None
    assert KeyIndex.build(pa.array([1, 2], pa.uint64())) is None
    index = KeyIndex.build(pa.array([5, 1, 5, 3]))
    assert index is not None
    assert sorted(index.rows(pa.array([5, None, 7])).tolist()) == [0, 2]
    with pytest.raises(pa.ArrowInvalid):
        index.rows(pa.array(["x"]))  # the arrangement leaves such a lookup to Spark


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=60),
    wanted=st.lists(st.none() | st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=30),
    kind=st.sampled_from(["int64", "date32", "timestamp"]),
)
def test_sorted_run_lookups_find_the_rows_a_scan_finds_however_spread_the_keys(
    tmp_path_factory: pytest.TempPathFactory, values: list[int], wanted: list[int | None], kind: str
) -> None:
    # (row groups of 2 rows: the keys asked may fall in every one; the run reads them all)
    import spate.render.sorted_run as sorted_run

    if kind == "date32":
        values = [v % 100_000 for v in values]
        wanted = [None if w is None else w % 100_000 for w in wanted]
    types = {"int64": pa.int64(), "date32": pa.date32(), "timestamp": pa.timestamp("us")}
    typ = types[kind]
    base = pa.int32() if kind == "date32" else pa.int64()
    n = len(values)
    table = pa.table(
        {
            "c0": pa.array(values, base).cast(typ),
            "c1": pa.array(range(n), pa.int64()),
            "_time": pa.array([0] * n, pa.int64()),
            "_diff": pa.array([1] * n, pa.int64()),
        }
    )
    path = tmp_path_factory.mktemp("run") / "b.parquet"
    old = sorted_run.RUN_GROUP_ROWS
    sorted_run.RUN_GROUP_ROWS = 2
    try:
        run = sorted_run.SortedRun.write(table, path, "c0")
    finally:
        sorted_run.RUN_GROUP_ROWS = old
    assert run is not None
    found = run.lookup(pa.array(wanted, base).cast(typ), table.schema)
    asked = {w for w in wanted if w is not None}
    assert sorted(found["c1"].to_pylist()) == [i for i, v in enumerate(values) if v in asked]
    assert found.schema.equals(table.schema)
    assert run.table().sort_by("c1").equals(table)  # the memory-mapped copy holds every row
    run.unlink()
    assert not run.copy.exists()


def test_deferred_merges_keep_every_read_the_same_and_lose_nothing_when_one_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spate.render.arrangement as arrangement
    from spate.render.batch import Engine

    engine = Engine(None, tmp_path / "e")  # type: ignore[arg-type]  # no Spark: Arrow only
    engine.defer_merges = True
    arr = Arrangement(engine, DESC, "t", as_of=0, internal=False)
    every: list[tuple[int | None, int, int, int]] = []
    seed = 11
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for t in range(3 * arrangement.MAX_DEFERRED_APPENDS):
        ks, ds = rng.integers(0, 9, 6), rng.integers(-2, 3, 6)
        rows = [(int(k), int(k) % 3, t, int(d)) for k, d in zip(ks, ds, strict=True)]
        every += [r for r in rows if r[3]]
        table = _updates([r for r in rows if r[3]])
        arr.append(Batch(DESC, table=table, rows=table.num_rows), t + 1)
        # the batches of at most MAX_DEFERRED_APPENDS appends wait for a merge
        assert len(arr._files) <= arrangement.MAX_DEFERRED_APPENDS + 8
        assert _sums(arr.updates()) == _sums(_updates(every))
        found = arr.lookup([0], pa.table({"k": [3, 4]}), null_safe=True)
        assert found is not None
        assert _sums(found) == _sums(_updates([r for r in every if r[0] in (3, 4)]))
        if t % 5 == 4:
            while engine.run_deferred():
                pass
            assert len(arr._files) <= 8  # merged: logarithmic again
    pending = len(arr._files)

    def failing(table: pa.Table, **kw: object) -> pa.Table:
        raise pa.ArrowMemoryError("out of memory")

    monkeypatch.setattr(arrangement, "consolidate", failing)
    assert pending > 1
    with pytest.raises(pa.ArrowMemoryError):
        arr.merge()
    assert _sums(arr.updates()) == _sums(_updates(every))  # no batch lost
