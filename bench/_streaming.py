"""Spark Structured Streaming as a peer of ``bench/e2e.py`` (inserts only: it cannot retract).

The same view (the highest bid per auction joined with its auction), as Structured Streaming
can keep it: bids arrive as Parquet files in a directory (the file source), are joined with
the static auctions and aggregated (``max`` per auction, seller and category: the same groups,
since an auction has one seller and category), in ``update`` output mode into a driver-side
table through ``foreachBatch``. The aggregation runs after the join because Structured
Streaming does not join after a streaming aggregation. Each step writes one file of 1,000 bids:
the 500 new bids of the spate step and the 500 replacements as plain inserts (a replaced bid
stays, which the max tolerates), the marker's rising price among them; *write -> visible* is
the time from writing the file until the marker's new price is in the table.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

VIEW = """
    SELECT b.auction, max(b.price) AS top, a.seller, a.category
    FROM bids b JOIN auctions a ON a.id = b.auction
    GROUP BY b.auction, a.seller, a.category
"""


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def local_session(app: str) -> SparkSession:
    """A plain ``local[2]`` Spark session for a baseline (no UI, 4 shuffle partitions)."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )


def structured_streaming(
    initial: pa.Table,
    auctions: pa.Table,
    step: Callable[[int], pa.Table],
    *,
    marker_auction: int,
    marker_price: Callable[[int], int],
    steps: int,
    work: Path,
) -> dict[str, Any]:
    """Load ``initial``, then ``steps`` steps one at a time and ``steps`` back to back (the
    k-th file is ``step(k)``, whose marker bid is priced ``marker_price(k)``); the figures."""
    from pyspark.sql import functions as F

    src, static = work / "ss-bids", work / "ss-auctions.parquet"
    src.mkdir()
    pq.write_table(auctions, static)
    pq.write_table(initial, src / "part-00000.parquet")
    spark = local_session("e2e-structured-streaming")
    table: dict[int, tuple[int, int, str]] = {}
    cond = threading.Condition()

    def sink(df: Any, _batch_id: int) -> None:
        rows = df.collect()
        with cond:
            for r in rows:
                table[r["auction"]] = (r["top"], r["seller"], r["category"])
            cond.notify_all()

    def wait_marker(price: int, timeout: float = 600.0) -> float:
        deadline = time.monotonic() + timeout
        with cond:
            while table.get(marker_auction, (-1,))[0] < price:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"Structured Streaming did not show price {price}")
                cond.wait(min(left, 1.0))
        return time.perf_counter()

    def write(k: int) -> None:
        tmp = src / f".part-{k:05d}.tmp"  # hidden: the file source ignores it until renamed
        pq.write_table(step(k), tmp)
        os.rename(tmp, src / f"part-{k:05d}.parquet")

    figures: dict[str, Any] = {}
    try:
        schema = spark.read.parquet(str(src / "part-00000.parquet")).schema
        bids = spark.readStream.schema(schema).parquet(str(src))
        auc = spark.read.parquet(str(static))
        view = (
            bids.join(auc, bids["auction"] == auc["id"])
            .groupBy("auction", "seller", "category")
            .agg(F.max("price").alias("top"))
        )
        t0 = time.perf_counter()
        query = (
            view.writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", str(work / "ss-checkpoint"))
            .start()
        )
        marked = initial.filter(pc.equal(initial["auction"], marker_auction))
        first = int(marked["price"][0].as_py())
        wait_marker(first)
        figures["ss_load_s"] = round(time.perf_counter() - t0, 2)
        visible = []
        for k in range(1, steps + 1):
            t = time.perf_counter()
            write(k)
            visible.append(wait_marker(marker_price(k)) - t)
        figures["ss_visible_p50_ms"] = round(_pct(visible, 0.5) * 1000, 1)
        figures["ss_visible_p99_ms"] = round(_pct(visible, 0.99) * 1000, 1)
        t = time.perf_counter()
        for k in range(steps + 1, 2 * steps + 1):
            write(k)
        wait_marker(marker_price(2 * steps))
        figures["ss_sustained_updates_per_s"] = round(steps * 1000 / (time.perf_counter() - t))
        query.stop()

        con = duckdb.connect()
        con.register("bids", pq.read_table(src))
        con.register("auctions", auctions)
        expected = {r[0]: (r[1], r[2], r[3]) for r in con.execute(VIEW).fetchall()}
        con.close()
        figures["ss_final_view_equals_duckdb"] = table == expected
    finally:
        spark.stop()
    print(
        f"structured streaming (inserts only): load {figures['ss_load_s']} s; write -> visible "
        f"p50 {figures['ss_visible_p50_ms']} ms p99 {figures['ss_visible_p99_ms']} ms; "
        f"sustained {figures['ss_sustained_updates_per_s']:,} inserts/s; final view "
        f"{'equals' if figures['ss_final_view_equals_duckdb'] else 'DIFFERS FROM'} DuckDB",
        flush=True,
    )
    return figures
