"""A running dataflow: compaction, bad plans, until, idle steps, failed steps, peeks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spate.errors import ReadBeforeSince
from spate.frontier.antichain import Antichain
from spate.ids import GlobalId
from spate.plan import col, count, lit, max_, sum_
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    SourceImport,
)
from spate.plan.errors import InvalidDataflow
from spate.plan.finishing import ColumnOrder, RowSetFinishing
from spate.plan.relation import Get, RelationExpr
from spate.render.dataflow import Dataflow, DataflowError
from spate.render.input import ArrowInput, ArrowInputs, InputData, ParquetInput
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_schema, updates_to_table
from spate.testing.plan_strategies import single_plan_dataflow
from tests.render.oracle import EVERY_DELTA_LARGE, peeked

BIDS = GlobalId.user(1)
DESC = RelationDesc.of(("auction", INT64, False), ("price", INT64, False), ("who", TEXT, True))
SRC = Get(BIDS, DESC)
VIEW = SRC.reduce(["auction"], top=max_(col("price")), n=count())
INPUTS = {BIDS: DESC}


def feed(rows: list[tuple[tuple[int, int, str | None], int, int]], upper: int) -> ArrowInputs:
    inputs = ArrowInputs.of({BIDS: updates_to_table(DESC, [])}, upper=0)
    inputs.append(BIDS, updates_to_table(DESC, rows), upper)
    return inputs


class NoSpark:
    """Fails the test if anything touches Spark."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"Spark was used ({name}) before the plan was validated")


def test_allow_compaction_keeps_reads_beyond_it_and_refuses_reads_below(
    spark: SparkSession, tmp_path: Path
) -> None:
    inputs = feed([((1, 10, "a"), 0, 1), ((1, 20, "b"), 2, 1), ((2, 5, None), 4, 1)], 6)
    df = Dataflow(
        single_plan_dataflow(VIEW, INPUTS, subscribe_id=None), inputs, spark=spark, scratch=tmp_path
    )
    df.step()
    ix = single_plan_dataflow(VIEW, INPUTS).index_exports[0].id
    before = {t: peeked(df.peek(ix, timestamp=t)) for t in range(6)}
    assert before[1] == Counter({(1, 10, 1): 1}) and before[5] == Counter(
        {(1, 20, 2): 1, (2, 5, 1): 1}
    )
    df.allow_compaction(ix, Antichain.of(3))
    inputs.append(BIDS, updates_to_table(DESC, [((1, 20, "b"), 6, -1)]), 8)
    df.step()  # merges now advance times below 3
    for t in range(3, 6):
        assert peeked(df.peek(ix, timestamp=t)) == before[t]
    assert peeked(df.peek(ix, timestamp=7)) == Counter({(1, 10, 1): 1, (2, 5, 1): 1})
    with pytest.raises(ReadBeforeSince, match=r"at 2 is before its since \{3\}"):
        df.peek(ix, timestamp=2)
    df.allow_compaction(ix, Antichain.empty())
    with pytest.raises(ReadBeforeSince, match="can no longer be read"):
        df.peek(ix, timestamp=7)
    df.drop()


def test_bad_descriptions_fail_before_any_spark_job(tmp_path: Path) -> None:
    good = single_plan_dataflow(VIEW, INPUTS)
    inputs = feed([], 1)
    build = good.objects_to_build[0]
    later = BuildDesc(GlobalId.user(7), Get(build.id, build.plan.desc))
    cases = {
        "not topological": (
            good.__class__(
                source_imports=good.source_imports,
                objects_to_build=(later, build),
                as_of=good.as_of,
            ),
            r"u7|u1000",
        ),
        "duplicate export": (
            good.__class__(
                source_imports=good.source_imports,
                objects_to_build=good.objects_to_build,
                index_exports=(good.index_exports[0], good.index_exports[0]),
                as_of=good.as_of,
            ),
            "u1001",
        ),
        "no as_of": (
            good.__class__(
                source_imports=good.source_imports,
                objects_to_build=good.objects_to_build,
            ),
            "as_of",
        ),
    }
    for name, (desc, needle) in cases.items():
        with pytest.raises(InvalidDataflow, match=needle):
            Dataflow(desc, inputs, spark=NoSpark(), scratch=tmp_path / name)  # type: ignore[arg-type]
    inputs.compact(BIDS, 3)
    with pytest.raises(InvalidDataflow, match=r"since \{3\}, beyond the as_of \{0\}"):
        Dataflow(good, inputs, spark=NoSpark(), scratch=tmp_path / "since")  # type: ignore[arg-type]


def test_until_stops_the_dataflow_and_idle_steps_run_no_job(
    spark: SparkSession, tmp_path: Path
) -> None:
    inputs = feed([((1, 10, "a"), 0, 1)], 2)
    desc = single_plan_dataflow(VIEW, INPUTS, until=4)
    df = Dataflow(desc, inputs, spark=spark, scratch=tmp_path)
    first = df.step()
    assert not first.idle and df.upper == Antichain.of(2)
    idle = df.step()  # nothing new: the upper stays
    assert idle.idle and df.upper == Antichain.of(2)
    inputs.append(BIDS, updates_to_table(DESC, []), 3)
    quiet = df.step()  # time 2 brought nothing: no Spark job, but the frontier moves
    assert quiet.idle and df.upper == Antichain.of(3)
    inputs.append(BIDS, updates_to_table(DESC, [((1, 30, "b"), 3, 1), ((1, 50, "c"), 4, 1)]), 9)
    df.step()
    assert df.upper == Antichain.of(4)  # the until
    ix = desc.index_exports[0].id
    assert peeked(df.peek(ix, timestamp=3)) == Counter({(1, 30, 2): 1})
    sub = desc.sink_exports[0].id
    assert df.step().idle and df.step().sink_updates.get(sub) is None
    df.drop()


def test_a_step_reports_the_updates_it_read_and_produced(
    spark: SparkSession, tmp_path: Path
) -> None:
    inputs = feed([((1, 10, "a"), 0, 1)], 2)
    desc = single_plan_dataflow(VIEW, INPUTS)
    df = Dataflow(desc, inputs, spark=spark, scratch=tmp_path)
    first = df.step()
    assert (first.rows_in, first.rows_out >= 1) == (1, True), first
    inputs.append(BIDS, updates_to_table(DESC, []), 3)
    quiet = df.step()
    assert quiet.idle and (quiet.rows_in, quiet.rows_out) == (0, 0)
    inputs.append(BIDS, updates_to_table(DESC, [((1, 30, "b"), 3, 1), ((2, 50, "c"), 3, 1)]), 4)
    later = df.step()
    out = sum(t.num_rows for t in later.sink_updates.values())
    assert later.rows_in == 2 and later.rows_out >= out > 0, later
    df.drop()


class BrokenInputs(ArrowInputs):
    """Inputs whose updates cannot be read while ``broken`` (a lost or unreadable batch)."""

    broken = False

    def updates(self, id: GlobalId, *, lower: int, upper: int) -> InputData:
        if self.broken:
            raise OSError(f"batch of {id} in [{lower}, {upper}) is unreadable")
        return super().updates(id, lower=lower, upper=upper)


def test_a_failing_step_reports_the_error_and_changes_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    # A failure that is not the data's (evaluation errors are captured as data instead) fails
    # the step, leaves the dataflow where it was, and the step succeeds once the cause is gone.
    inputs = BrokenInputs.of({BIDS: updates_to_table(DESC, [])}, upper=0)
    inputs.append(BIDS, updates_to_table(DESC, [((1, 1, "a"), 0, 1)]), 1)
    df = Dataflow(
        single_plan_dataflow(SRC.map(double=col("price") * lit(2)), INPUTS),
        inputs,
        spark=spark,
        scratch=tmp_path,
        name="unreadable",
    )
    df.step()
    inputs.append(BIDS, updates_to_table(DESC, [((2, 3, "x"), 1, 1)]), 2)
    inputs.broken = True
    with pytest.raises(
        DataflowError, match=r"dataflow unreadable: step \[1, 2\) failed.*unreadable"
    ):
        df.step()
    assert df.upper == Antichain.of(1)
    with pytest.raises(DataflowError):  # the same input fails the same way: nothing was lost
        df.step()
    assert df.upper == Antichain.of(1)
    inputs.broken = False
    df.step()
    assert df.upper == Antichain.of(2)
    df.drop()


def test_peek_finishing_and_literal_key_lookups(spark: SparkSession, tmp_path: Path) -> None:
    rows = [((a, p, None), 0, 1) for a, p in [(1, 5), (1, 9), (2, 7), (3, 1), (3, 1)]]
    inputs = feed(rows, 1)
    ix = GlobalId.user(50)
    desc = DataflowDescription(
        source_imports=(SourceImport(BIDS, DESC),),
        index_exports=(IndexExport(ix, IndexDesc(BIDS, (0,)), DESC),),
        as_of=Antichain.of(0),
    )
    df = Dataflow(desc, inputs, spark=spark, scratch=tmp_path)
    df.step()
    top = df.peek(
        ix,
        timestamp=0,
        finishing=RowSetFinishing((ColumnOrder(1, desc=True),), limit=3, offset=1, project=(1, 0)),
    )
    assert top.column_names == ["c1", "c0", "_diff"]
    assert top.to_pylist() == [
        {"c1": 7, "c0": 2, "_diff": 1},
        {"c1": 5, "c0": 1, "_diff": 1},
        {"c1": 1, "c0": 3, "_diff": 1},
    ]
    hit = df.peek(ix, timestamp=0, literal_constraints=[(3,), (9,)])
    assert hit.column_names == ["auction", "price", "who", "_diff"]
    assert hit.to_pylist() == [{"auction": 3, "price": 1, "who": None, "_diff": 2}]
    assert df.peek(ix, timestamp=0, literal_constraints=[]).num_rows == 0
    assert isinstance(df.arrangement(ix).updates(), pa.Table)
    df.drop()
    assert not any((tmp_path).rglob("*.parquet"))


def test_small_steps_run_few_spark_actions(spark: SparkSession, tmp_path: Path) -> None:
    """Projecting an import's small delta runs no Spark action (its columns are picked as it
    is read); a reduce keyed by the join key reads its history from the join's inputs, and
    both the join and a max reduce are computed on the driver: no action at all; a reduce
    the driver does not compute (a distinct sum) keyed otherwise is one action (the join
    still on the driver); results stay exact at every step (checked against the expected
    maxima), whichever input changes."""
    auctions = GlobalId.user(2)
    adesc = RelationDesc.of(("id", INT64, False), ("seller", TEXT, True))
    joined = (
        SRC.project("auction", "price")
        .join(Get(auctions, adesc).project("id"), on=[("auction", "id")])
        .project("auction", "price")
    )
    view = joined.reduce(["auction"], top=max_(col("price")))
    inputs = ArrowInputs.of(
        {
            BIDS: updates_to_table(DESC, [((a, 10 * a, "x"), 0, 1) for a in range(1, 6)]),
            auctions: updates_to_table(adesc, [((a, "s"), 0, 1) for a in range(1, 5)]),
        },
        upper=1,
    )
    desc = single_plan_dataflow(view, {BIDS: DESC, auctions: adesc})
    df = Dataflow(desc, inputs, spark=spark, scratch=tmp_path)
    df.step()
    ix = desc.index_exports[0].id
    assert peeked(df.peek(ix, timestamp=0)) == Counter({(a, 10 * a): 1 for a in range(1, 5)})
    # time 1: a higher bid on auction 2, the top bid of auction 3 retracted; nothing for 5
    # (no such auction) and nothing new for auctions
    inputs.append(
        BIDS,
        updates_to_table(DESC, [((2, 99, "y"), 1, 1), ((3, 30, "x"), 1, -1), ((5, 7, "z"), 1, 1)]),
        2,
    )
    inputs.append(auctions, updates_to_table(adesc, []), 2)
    report = df.step()
    assert report.actions == 0, report
    assert peeked(df.peek(ix, timestamp=1)) == Counter({(1, 10): 1, (2, 99): 1, (4, 40): 1})
    # time 2: auction 5 appears (its bid joins now), auction 1 goes; time 3: the bid of 99
    # is retracted
    inputs.append(auctions, updates_to_table(adesc, [((5, "s"), 2, 1), ((1, "s"), 2, -1)]), 3)
    inputs.append(BIDS, updates_to_table(DESC, []), 3)
    assert df.step().actions == 0
    assert peeked(df.peek(ix, timestamp=2)) == Counter({(2, 99): 1, (4, 40): 1, (5, 50): 1})
    inputs.append(BIDS, updates_to_table(DESC, [((2, 99, "y"), 3, -1)]), 4)
    inputs.append(auctions, updates_to_table(adesc, []), 4)
    assert df.step().actions == 0
    assert peeked(df.peek(ix, timestamp=3)) == Counter({(2, 20): 1, (4, 40): 1, (5, 50): 1})
    assert peeked(df.peek(ix, timestamp=1)) == Counter({(1, 10): 1, (2, 99): 1, (4, 40): 1})
    only_project = single_plan_dataflow(SRC.project("price"), INPUTS)
    pf = Dataflow(
        only_project, feed([((1, 10, "a"), 0, 1)], 1), spark=spark, scratch=tmp_path / "p"
    )
    assert pf.step().actions == 0
    pf.drop()
    by_price = single_plan_dataflow(
        joined.reduce(["price"], n=count(), s=sum_(col("auction"), distinct=True)),
        {BIDS: DESC, auctions: adesc},
    )
    bp = Dataflow(by_price, inputs, spark=spark, scratch=tmp_path / "by-price", name="by-price")
    bp.step(Antichain.of(1))
    # its history is its own arrangement of the join's output (the join's delta computed on
    # the driver); the distinct sum is Spark's: the step's only job
    assert bp.step(Antichain.of(2)).actions == 1
    bp.step()
    assert peeked(bp.peek(by_price.index_exports[0].id, timestamp=3)) == Counter(
        {(20, 1, 2): 1, (40, 1, 4): 1, (50, 1, 5): 1, (7, 1, 5): 1}  # auction 5's bid joins at 2
    )
    bp.drop()
    df.drop()


def test_hydrating_a_reduce_from_a_snapshot_with_retractions(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A snapshot whose retractions cancel insertions only once consolidated: hydration must
    not take the path that aggregates rows as they are (it would see price 100 for auction 1)."""
    rows = [((1, 100, "a"), 0, 1), ((1, 50, "b"), 0, 1), ((1, 100, "a"), 1, -1)]
    rows += [((2, 7, None), 0, 1), ((2, 7, None), 1, 1)]
    df = Dataflow(
        single_plan_dataflow(VIEW, INPUTS, as_of=1, subscribe_id=None),
        feed(rows, 2),
        spark=spark,
        scratch=tmp_path,
        settings=EVERY_DELTA_LARGE,
    )
    df.step()
    (index,) = df.description.index_exports
    assert peeked(df.peek(index.id, timestamp=1)) == Counter({(1, 50, 1): 1, (2, 7, 2): 1})
    df.drop()


def test_hydrating_a_reduce_from_a_negative_snapshot_fails(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = [((1, 100, "a"), 0, 1), ((1, 100, "a"), 1, -2)]
    df = Dataflow(
        single_plan_dataflow(VIEW, INPUTS, as_of=1, subscribe_id=None),
        feed(rows, 2),
        spark=spark,
        scratch=tmp_path,
        name="negative",
        settings=EVERY_DELTA_LARGE,
    )
    with pytest.raises(DataflowError, match="negative multiplicity"):
        df.step()
    assert df.upper == Antichain.of(1)
    df.drop()


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_hydrating_a_global_reduce(spark: SparkSession, tmp_path: Path, large: bool) -> None:
    """A reduce without a key over a snapshot: one row, or none when the snapshot cancels
    out (grouping by nothing would give a row of NULLs and a zero count)."""
    view = SRC.reduce([], top=max_(col("price")), n=count())
    cancelling = [((1, 100, "a"), 0, 1), ((1, 100, "a"), 1, -1)]
    for rows, want in (
        (cancelling, Counter()),
        ([*cancelling, ((2, 7, None), 0, 2)], Counter({(7, 2): 1})),
    ):
        df = Dataflow(
            single_plan_dataflow(view, INPUTS, as_of=1, subscribe_id=None),
            feed(rows, 2),
            spark=spark,
            scratch=tmp_path / str(len(rows)),
            settings=EVERY_DELTA_LARGE if large else None,
        )
        df.step()
        (index,) = df.description.index_exports
        assert peeked(df.peek(index.id, timestamp=1)) == want, rows
        df.drop()


class ParquetSnapshot:
    """A resolver serving one collection's snapshot as a Parquet file (as replicas serve
    persist batches) and recording the columns each read asked for."""

    def __init__(self, path: Path, upper: int) -> None:
        self.path = path
        self.upper_ = upper
        self.asked: list[list[str] | None] = []

    def since(self, id: GlobalId) -> Antichain:
        return Antichain.of(0)

    def upper(self, id: GlobalId) -> Antichain:
        return Antichain.of(self.upper_)

    def snapshot(self, id: GlobalId, *, as_of: int) -> ParquetInput:
        asked = self.asked

        class Recording(ParquetInput):
            def read(self, columns: Sequence[str] | None = None) -> pa.Table:
                asked.append(None if columns is None else list(columns))
                return super().read(columns)

        return Recording((self.path,), 0, as_of + 1)

    def updates(self, id: GlobalId, *, lower: int, upper: int) -> ArrowInput:
        return ArrowInput(updates_schema(DESC).empty_table())


@pytest.mark.parametrize(
    ("view", "columns"),
    [
        (
            SRC.project("auction", "price").reduce(["auction"], top=max_(col("price"))),
            ["auction", "price"],
        ),
        # the Get under the Project and a Get elsewhere: every column is read
        (
            SRC.project("auction").union(SRC.filter(col("price") > lit(60)).project("auction")),
            None,
        ),
    ],
    ids=["projected", "used-whole"],
)
def test_a_snapshot_is_read_for_the_columns_the_dataflow_uses(
    spark: SparkSession, tmp_path: Path, view: RelationExpr, columns: list[str] | None
) -> None:
    rows = [((a, 10 * a + p, f"w{a}{p}"), 0, 1) for a in range(3) for p in range(9)]
    rows += [((1, 18, "w18"), 0, -1), ((2, 99, None), 0, 2)]
    path = tmp_path / "snapshot.parquet"
    pq.write_table(updates_to_table(DESC, rows), path)
    desc = single_plan_dataflow(view, INPUTS, as_of=0, subscribe_id=None)
    (index,) = desc.index_exports
    resolver = ParquetSnapshot(path, upper=1)
    via_files = Dataflow(desc, resolver, spark=spark, scratch=tmp_path / "files")
    via_arrow = Dataflow(desc, feed(rows, 1), spark=spark, scratch=tmp_path / "arrow")
    via_files.step()
    via_arrow.step()
    assert resolver.asked == [columns]
    got = peeked(via_files.peek(index.id, timestamp=0))
    assert got == peeked(via_arrow.peek(index.id, timestamp=0)) and got
    via_files.drop()
    via_arrow.drop()


def test_a_dataflow_whose_merges_wait_for_maintain_answers_as_one_that_merges_at_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    import random

    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    plan = SRC.reduce(["auction"], top=max_(col("price")), n=count())
    desc = single_plan_dataflow(plan, INPUTS, subscribe_id=None)
    ix = desc.index_exports[0].id
    eager_in, deferred_in = feed([], 1), feed([], 1)
    eager = Dataflow(desc, eager_in, spark=spark, scratch=tmp_path / "eager")
    deferred = Dataflow(desc, deferred_in, spark=spark, scratch=tmp_path / "deferred")
    deferred.defer_merges()
    live: list[tuple[int, int, str | None]] = []
    for t in range(1, 30):
        rows: list[tuple[tuple[int, int, str | None], int, int]] = []
        for _ in range(rng.randrange(1, 6)):
            row = (rng.randrange(4), rng.randrange(100), rng.choice(["a", None]))
            live.append(row)
            rows.append((row, t, 1))
        if live and rng.random() < 0.6:  # retract a live bid, maybe an auction's top
            gone = live.pop(rng.randrange(len(live)))
            rows.append((gone, t, -1))
        for inputs in (eager_in, deferred_in):
            inputs.append(BIDS, updates_to_table(DESC, rows), t + 1)
        eager.step()
        deferred.step()
        if rng.random() < 0.3:
            while deferred.maintain():
                pass
        assert peeked(deferred.peek(ix, timestamp=t)) == peeked(eager.peek(ix, timestamp=t))
    while deferred.maintain():  # whatever is left merges
        pass
    assert peeked(deferred.peek(ix, timestamp=29)) == peeked(eager.peek(ix, timestamp=29))
    eager.drop()
    deferred.drop()
