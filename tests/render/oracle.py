"""Run a dataflow on Spark step by step and compare every export, at every time, with the
reference evaluator."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription
from spate.plan.evaluation.scalar import canonical_row
from spate.render.batch import EngineSettings
from spate.render.dataflow import FOREVER, Dataflow
from spate.render.input import ArrowInputs
from spate.repr.arrow import table_to_rows, table_to_updates, updates_to_table
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Row
from spate.testing.reference import accumulate, expected_contents

Update = tuple[Row, int, int]


EVERY_DELTA_LARGE = EngineSettings(small_rows=0, driver_rows=0)
"""Every delta takes the large path: Parquet instead of Arrow, large snapshots (and what is
projected from them) left unconsolidated, and Spark computes every step."""


def canon(rows: Mapping[Row, int], desc: RelationDesc) -> Counter[Row]:
    out: Counter[Row] = Counter()
    for r, m in rows.items():
        out[canonical_row(tuple(r), desc.columns)] += m
    return Counter({r: m for r, m in out.items() if m})


def peeked(table: pa.Table) -> Counter[Row]:
    """A peek's answer (data columns and ``_diff``) as a multiset."""
    data = [c for c in table.column_names if c != DIFF_COLUMN]
    rows = table_to_rows(table, data)
    out: Counter[Row] = Counter()
    for row, diff in zip(rows, table.column(DIFF_COLUMN).to_pylist(), strict=True):
        out[row] += diff
    return out


def run_and_check(
    spark: SparkSession,
    scratch: Path,
    dataflow: DataflowDescription,
    streams: Mapping[GlobalId, Sequence[Update]],
    descs: Mapping[GlobalId, RelationDesc],
    step_uppers: Sequence[int],
    settings: EngineSettings | None = None,
) -> int:
    """Feed ``streams`` in steps ending at ``step_uppers``; check every export at every time.

    Returns the number of (export, time) contents checked.
    """
    assert dataflow.as_of is not None
    (as_of,) = dataflow.as_of.elements
    imports = {s.id for s in dataflow.source_imports}
    empty = {id: updates_to_table(descs[id], []) for id in imports}
    inputs = ArrowInputs.of(empty, upper=0)
    # everything up to the as_of is there before the dataflow starts (times compacted to it)
    fed = as_of + 1
    for id in imports:
        inputs.append(id, updates_to_table(descs[id], [u for u in streams[id] if u[1] < fed]), fed)
    df = Dataflow(dataflow, inputs, spark=spark, scratch=scratch, name="oracle", settings=settings)
    expected = expected_contents(
        dataflow, {id: streams[id] for id in imports}, upper=max(step_uppers)
    )
    sink_updates: dict[GlobalId, list[Update]] = {s.id: [] for s in dataflow.sink_exports}
    checked = 0
    lo = as_of
    try:
        for hi in step_uppers:
            assert hi > lo
            if hi > fed:
                for id in imports:
                    ups = [u for u in streams[id] if fed <= u[1] < hi]
                    inputs.append(id, updates_to_table(descs[id], ups), hi)
                fed = hi
            report = df.step()
            closed = df.upper.is_empty()  # no imports: every input is known, forever
            assert (
                (closed and not imports)
                or df.upper.elements == (hi,)
                or (not dataflow.until.is_empty() and df.upper.elements[0] <= hi)
            )
            bound = FOREVER if closed else hi
            for id, table in report.sink_updates.items():
                for row, t, d in table_to_updates(table):
                    assert lo <= t < bound, f"sink {id}: update at {t} outside [{lo}, {bound})"
                    sink_updates[id].append((row, t, d))
            top = max(step_uppers) if closed else df.upper.elements[0]
            for ix in dataflow.index_exports:
                for t in range(lo, top):
                    got = peeked(df.peek(ix.id, timestamp=t))
                    want = canon(expected[ix.id].get(t, Counter()), ix.desc)
                    assert canon(got, ix.desc) == want, f"index {ix.id} at {t}"
                    checked += 1
            lo = top
            if closed:
                break
        for sink in dataflow.sink_exports:
            for t, want in expected[sink.id].items():
                if t >= lo:
                    continue
                got = accumulate(sink_updates[sink.id], t)
                assert canon(got, sink.from_desc) == canon(want, sink.from_desc), (
                    f"sink {sink.id} at {t}"
                )
                checked += 1
    finally:
        df.drop()
    return checked
