"""Benchmark: ``consolidate`` against a bare pyarrow group-by-sum of the same table.

1M updates over (key int64, value string, _time, _diff): 10 % of rows duplicate another
``(row, time)``, 10 % form zero-sum insert/retract pairs. The baseline is the limit: pyarrow's
hash group-by summing ``_diff`` with nothing else. ``consolidate`` additionally drops zero sums
and restores the schema. Target: ratio (consolidate rows/s ÷ baseline rows/s) >= 0.8.

    python bench/consolidate.py [--rows N] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa

from bench._results import write_result
from spate.repr.consolidate import consolidate


def make_table(rows: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    base = int(rows * 0.7)
    dup = int(rows * 0.1)
    pairs = (rows - base - dup) // 2
    keys = rng.integers(0, rows, base)
    times = rng.integers(0, 1000, base)
    diffs = np.ones(base, dtype=np.int64)
    di = rng.integers(0, base, dup)
    zi = rng.integers(0, base, pairs)
    k = np.concatenate([keys, keys[di], keys[zi], keys[zi]])
    t = np.concatenate([times, times[di], times[zi] + 1000, times[zi] + 1000])
    d = np.concatenate([diffs, diffs[di], np.ones(pairs, np.int64), -np.ones(pairs, np.int64)])
    perm = rng.permutation(len(k))
    k, t, d = k[perm], t[perm], d[perm]
    values = pa.array([f"v{x % 1000}" for x in k.tolist()], pa.string())
    return pa.table({"key": k, "value": values, "_time": t, "_diff": d})


def baseline(table: pa.Table) -> pa.Table:
    return table.group_by(["key", "value", "_time"], use_threads=True).aggregate([("_diff", "sum")])


def timed(fn: object, table: pa.Table, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(table)  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    table = make_table(args.rows)
    out = consolidate(table)
    assert out.num_rows < table.num_rows
    # Interleave runs so that machine noise hits both sides alike.
    ours, theirs = [], []
    for _ in range(args.repeat):
        theirs.append(timed(baseline, table, 1))
        ours.append(timed(consolidate, table, 1))
    t_base, t_ours = statistics.median(theirs), statistics.median(ours)
    r_base, r_ours = args.rows / t_base, args.rows / t_ours
    ratio = r_ours / r_base
    print(f"rows={args.rows:,} in={table.num_rows:,} out={out.num_rows:,}")
    print(f"baseline pyarrow group-by-sum: {r_base / 1e6:6.2f} M rows/s ({t_base * 1000:.0f} ms)")
    print(f"spate consolidate:            {r_ours / 1e6:6.2f} M rows/s ({t_ours * 1000:.0f} ms)")
    print(f"ratio: {ratio:.2f}  (target >= 0.8)")
    write_result(
        "consolidate",
        {
            "rows": args.rows,
            "baseline_rows_per_s": round(r_base),
            "consolidate_rows_per_s": round(r_ours),
            "ratio": round(ratio, 3),
            "target": 0.8,
        },
    )


if __name__ == "__main__":
    main()
