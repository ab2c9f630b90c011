"""Benchmark: spate end to end through the public API, against recomputing the same view.

The workload: ``--bids`` bids (default 1M) over ``--auctions`` auctions (default 100k), the
highest bid per auction joined with its auction, kept as a materialized view on a cluster of
one replica and observed with ``subscribe``::

    best = bids.reduce(["auction"], top=max_(col("price")))
    view = best.join(auctions, on=[("auction", "id")]).project(auction, top, seller, category)

Each step writes 500 new bids (``insert`` of an Arrow table) and replaces 500 live bids by new
ones (``update`` of 500 ``(old, new)`` pairs; "1000 updates" per step). One of the replaced bids
is a marker bid on an auction of its own whose price rises every step, so every step changes
the view at the update's timestamp: *write -> visible* is the time from the start of the step's
writes until the subscribe delivers a change at (or after) that timestamp.

Figures printed and written to ``bench/results/e2e.json``:

* load: the two tables inserted as Arrow tables (rows/s);
* steps one at a time: p50/p99 of the write calls (insert, update, both) and of write -> visible;
* the same steps as **one write each** (a transaction of the step's inserts and replacements,
  at one timestamp, as the peers take a step: one changelog file, one batch): the write call's
  and write -> visible p50/p99;
* sustained: ``--steps`` steps back to back (no waiting for visibility; each write call waits
  for its own acknowledgement), then until the last is visible: updates/s, with two write calls
  per step and with one (the transaction above); and again with the
  writes pipelined (``env.pipeline()``: calls return at once, successive writes share group
  commits, every write acknowledged durable before the clock stops);
* peak RSS of the whole process tree (this process, the environment's replicas, Spark);
* baselines in the same run, over the same final data: a DuckDB recompute of the view and a
  Spark batch recompute (local[2], from Parquet), each the median of three;
* the final view (the subscribe's accumulated changes, and a read of the view) equals the
  DuckDB recompute (raises otherwise).

* Spark Structured Streaming as a peer in the same run, inserts only (it cannot retract; see
  ``bench/_streaming.py``): load, write -> visible p50/p99, sustained inserts/s, its final
  view checked against DuckDB (``--skip-streaming`` leaves it out);
* with ``--with pathway``, Pathway as the incremental peer on the same steps, retractions
  included (``bench/_pathway.py``: in a virtual environment of its own, made on first use);
* with ``--with flink``, Flink SQL on a local mini-cluster (parallelism 2, buffer timeout 0
  and the default) on the same steps over a changelog file source (``bench/_flink.py``: PyFlink
  in a virtual environment of its own, made on first use; needs Java 11/17);
* the ratios of spate's figures to each peer's;
* a per-stage breakdown of write -> visible (``bench/_breakdown.py``, from the latency marks of
  ``spate.persist.latency_trace``), for the steps of two write calls and for the steps as one
  write each (``one_write_visible_breakdown_ms``; the figure the peers compare with).

    python bench/e2e.py [--small] [--steps N] [--skip-streaming] [--with pathway]
        [--with flink] [--out e2e]

**The keyed case** (``--keyed``, written to ``bench/results/e2e_keyed.json``; nothing else
runs): the same bids table twice in one environment, ``keyed`` with a PRIMARY KEY on ``id``
and ``plain`` without, loaded with the same rows; then ``--steps`` steps each writing the same
500 inserts and 500 replacements into both (in alternating order, so that both see the same
machine). Figures: each table's load time and the p50/p99 of a step's writes, the ratio
keyed/plain of the p50 (what enforcement costs a write), the first keyed write apart (it counts
the keys once); all of it at ``--bids`` and at a tenth of it, and the ratio of the keyed p50 at
the two sizes: about 1 when a write's check probes the keys it writes, about 10 if it scanned
the table. A duplicate key written at the end must fail (23505) and change nothing.

    python bench/e2e.py --keyed [--small] [--bids N] [--steps N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb
import psutil

from bench._breakdown import OFF_PATH, StepTimes, breakdown, format_table
from bench._flink import flink_peer
from bench._pathway import pathway_peer
from bench._results import write_result
from bench._streaming import local_session, structured_streaming
from spate import INT64, TEXT, Environment, RelationDesc, col, max_
from spate.persist import latency_trace

BIDS = RelationDesc.of(
    ("id", INT64, False),
    ("auction", INT64, False),
    ("bidder", INT64, False),
    ("price", INT64, False),
)
AUCTIONS = RelationDesc.of(("id", INT64, False), ("seller", INT64, False), ("category", TEXT))
MARKER = -1  # the marker bid's auction
STEP_NEW = 500
STEP_REPLACED = 500
VIEW_SQL = """
    SELECT b.auction, b.top, a.seller, a.category
    FROM (SELECT auction, max(price) AS top FROM bids GROUP BY auction) b
    JOIN auctions a ON a.id = b.auction
"""


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


class Data:
    """The live bids (numpy columns, kept in step with what was written) and the auctions."""

    def __init__(self, n_bids: int, n_auctions: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.n_auctions = n_auctions
        ids = np.arange(n_auctions, dtype=np.int64)
        self.auctions = pa.table(
            {
                "id": np.concatenate([ids, [MARKER]]),
                "seller": self.rng.integers(0, max(1, n_auctions // 3), n_auctions + 1),
                "category": [f"c{i % 10}" for i in range(n_auctions + 1)],
            }
        )
        self.next_id = 0
        self.cols: dict[str, np.ndarray] = {k: np.empty(0, np.int64) for k in BIDS.names}
        self.append(self.make(n_bids - 1))
        self.marker = (self.next_id, MARKER, 0, 1)
        self.append(
            {k: np.array([v], np.int64) for k, v in zip(BIDS.names, self.marker, strict=True)}
        )
        self.next_id += 1

    def make(self, n: int) -> dict[str, np.ndarray]:
        ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        self.next_id += n
        return {
            "id": ids,
            "auction": self.rng.integers(0, self.n_auctions, n),
            "bidder": self.rng.integers(0, 100_000, n),
            "price": np.round(10 ** (6 * self.rng.random(n)) * 100).astype(np.int64),
        }

    def append(self, new: dict[str, np.ndarray]) -> None:
        self.cols = {k: np.concatenate([self.cols[k], new[k]]) for k in BIDS.names}

    def table(self) -> pa.Table:
        return pa.table(self.cols)

    def step(self, k: int) -> tuple[pa.Table, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
        """500 new bids (a table) and 500 replacements, the marker among them."""
        new = self.make(STEP_NEW)
        n = len(self.cols["id"])
        chosen = self.rng.choice(n - 1, STEP_REPLACED - 1, replace=False)  # not the marker
        olds = [tuple(int(self.cols[c][i]) for c in BIDS.names) for i in chosen]
        repl = self.make(STEP_REPLACED - 1)
        pairs = []
        for j, i in enumerate(chosen):
            row = tuple(int(repl[c][j]) for c in BIDS.names)
            pairs.append((olds[j], row))
            for c, v in zip(BIDS.names, row, strict=True):
                self.cols[c][i] = v
        marker = (self.marker[0], MARKER, 0, 10**12 + k)
        pairs.append((self.marker, marker))
        self.cols["price"][n - 1] = marker[3]
        self.marker = marker
        # The marker stays the last row: new bids go before it.
        last = {c: self.cols[c][-1:] for c in BIDS.names}
        self.cols = {c: np.concatenate([self.cols[c][:-1], new[c], last[c]]) for c in BIDS.names}
        return pa.table(new), pairs


class Observer(threading.Thread):
    """Accumulates the subscribe's changes; records when each timestamp became visible."""

    def __init__(self, env: Environment) -> None:
        super().__init__(daemon=True, name="subscribe")
        self.env = env
        self.view: Counter[tuple[Any, ...]] = Counter()
        self.max_time = -1
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.seen_at = 0.0
        self.seen_ns = 0

    def run(self) -> None:
        try:
            for changes in self.env.subscribe("best"):
                now = time.perf_counter()
                with self.cond:
                    for t, row, diff in changes:
                        self.view[row] += diff
                        if self.view[row] == 0:
                            del self.view[row]
                        self.max_time = max(self.max_time, t)
                    self.seen_at = now
                    self.seen_ns = time.time_ns()
                    self.cond.notify_all()
        except BaseException as e:  # reported by the waiter
            self.error = e
            with self.cond:
                self.cond.notify_all()

    def wait_for(self, ts: int, timeout: float = 600.0) -> float:
        """Wait until a change at ``ts`` or later was delivered; when (perf_counter)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.max_time < ts:
                if self.error is not None:
                    raise self.error
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the view did not reach time {ts} in {timeout} s")
                self.cond.wait(left)
            return self.seen_at


class RssSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True, name="rss")
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.stop.wait(0.5):
            total = 0
            for p in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            self.peak = max(self.peak, total)


def duckdb_view(bids: pa.Table, auctions: pa.Table) -> tuple[Counter[tuple[Any, ...]], float]:
    con = duckdb.connect()
    con.register("bids", bids)
    con.register("auctions", auctions)
    times, rows = [], []
    for _ in range(3):
        t = time.perf_counter()
        rows = con.execute(VIEW_SQL).fetchall()
        times.append(time.perf_counter() - t)
    con.close()
    return Counter(tuple(r) for r in rows), statistics.median(times)


def spark_recompute(bids: pa.Table, auctions: pa.Table, work: Path) -> tuple[int, float]:
    pq.write_table(bids, work / "bids.parquet")
    pq.write_table(auctions, work / "auctions.parquet")
    spark = local_session("e2e-baseline")
    try:
        spark.read.parquet(str(work / "bids.parquet")).createOrReplaceTempView("bids")
        spark.read.parquet(str(work / "auctions.parquet")).createOrReplaceTempView("auctions")
        times, n = [], 0
        for i in range(4):
            t = time.perf_counter()
            out = work / f"view{i}"
            spark.sql(VIEW_SQL).write.mode("overwrite").parquet(str(out))
            if i:  # the first run warms the JVM up
                times.append(time.perf_counter() - t)
            n = pq.read_table(out).num_rows
        return n, statistics.median(times)
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="100k bids, 10k auctions, few steps")
    ap.add_argument("--bids", type=int, default=1_000_000)
    ap.add_argument("--auctions", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=None, help="steps (default 20; 8 with --small)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default="e2e")
    ap.add_argument("--skip-streaming", action="store_true", help="no Structured Streaming peer")
    ap.add_argument(
        "--with",
        dest="peers",
        action="append",
        default=[],
        choices=["pathway", "flink"],
        help="a peer",
    )
    ap.add_argument("--keyed", action="store_true", help="only the keyed write path case")
    args = ap.parse_args()
    if args.small:
        args.bids, args.auctions = 100_000, 10_000
    if args.steps is None:
        args.steps = 8 if args.small else 20
    if args.keyed:
        figures = keyed_case(args)
        write_result(f"{args.out}_keyed", figures)
        return
    print(f"seed {args.seed}; load average {os.getloadavg()} on {os.cpu_count()} cpus", flush=True)
    data = Data(args.bids, args.auctions, args.seed)
    rss = RssSampler()
    rss.start()
    with tempfile.TemporaryDirectory(prefix="spate-e2e-") as tmp:
        work = Path(tmp)
        # Latency marks (one line per stage a write passes, here and in the replicas, which
        # inherit the setting): read back into the per-stage table of the steps.
        latency_trace.enable(str(work / "latency.trace"))
        env = Environment.open(work / "data")
        try:
            figures = run(env, data, args, work)
        finally:
            env.close()
        rss.stop.set()
        figures["peak_rss_mb"] = round(
            max(rss.peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**20
        )
        figures["load_avg_end"] = os.getloadavg()[0]
        print(f"peak RSS (process tree): {figures['peak_rss_mb']} MB", flush=True)
        print("spark batch recompute...", flush=True)
        n, spark_s = spark_recompute(data.table(), data.auctions, work)
        assert n == figures["view_rows"], (n, figures["view_rows"])
        figures["spark_recompute_s"] = round(spark_s, 3)
        print(f"spark batch recompute: {spark_s * 1000:.0f} ms ({n} rows)", flush=True)
        if not args.skip_streaming:
            figures.update(streaming_peer(args, work))
        if "pathway" in args.peers:
            figures.update(pathway_peer_run(args, work))
        if "flink" in args.peers:
            try:  # the figures measured so far are written either way
                figures.update(flink_peer_run(args, work))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                figures["flink_error"] = str(e)[-2000:]
                print(f"the Flink peer failed: {str(e)[-500:]}", flush=True)
        ratios(figures)
    write_result(args.out, figures)
    if not figures["final_view_equals_duckdb"]:
        raise AssertionError(figures["final_view_mismatch"])
    if figures.get("ss_final_view_equals_duckdb") is False:
        raise AssertionError("the Structured Streaming view differs from its DuckDB recompute")
    if "flink_error" in figures:
        raise RuntimeError(f"the Flink peer failed: {figures['flink_error'][-500:]}")
    if figures.get("pathway_final_view_equals_duckdb") is False:
        raise AssertionError("the Pathway view differs from the DuckDB recompute")
    for name in ("bt0", "default"):
        if figures.get(f"flink_{name}_final_view_equals_duckdb") is False:
            raise AssertionError(f"the Flink ({name}) view differs from the DuckDB recompute")


def keyed_case(args: argparse.Namespace) -> dict[str, Any]:
    """The write path with and without a PRIMARY KEY, at two sizes (module docs)."""
    from spate.environment.catalog import UniqueConstraint
    from spate.errors import UniqueViolation

    print(f"keyed case; load average {os.getloadavg()} on {os.cpu_count()} cpus", flush=True)
    figures: dict[str, Any] = {"steps": args.steps}
    for label, n in (("small", max(1000, args.bids // 10)), ("full", args.bids)):
        data = Data(n, args.auctions, args.seed)
        with tempfile.TemporaryDirectory(prefix="spate-e2e-keyed-") as tmp:
            env = Environment.open(Path(tmp) / "data")
            try:
                env.create_table("plain", BIDS)
                pkey = UniqueConstraint("keyed_pkey", ("id",), primary=True)
                env.create_table("keyed", BIDS, constraints=[pkey])
                for name in ("plain", "keyed"):
                    t0 = time.perf_counter()
                    env.insert(name, data.table())
                    figures[f"{label}_{name}_load_s"] = round(time.perf_counter() - t0, 3)
                writes: dict[str, list[float]] = {"plain": [], "keyed": []}
                for k in range(args.steps + 1):
                    new, pairs = data.step(k)
                    order = ("plain", "keyed") if k % 2 else ("keyed", "plain")
                    for name in order:
                        t0 = time.perf_counter()
                        env.insert(name, new)
                        env.update(name, pairs)
                        writes[name].append(time.perf_counter() - t0)
                figures[f"{label}_keyed_first_write_ms"] = round(writes["keyed"][0] * 1000, 1)
                for name, samples in writes.items():
                    rest = samples[1:]  # the first keyed write counts the keys once
                    figures[f"{label}_{name}_write_p50_ms"] = round(pct(rest, 0.5) * 1000, 1)
                    figures[f"{label}_{name}_write_p99_ms"] = round(pct(rest, 0.99) * 1000, 1)
                duplicate = data.table().slice(0, 1)
                before = env.select("keyed").num_rows
                try:
                    env.insert("keyed", duplicate)
                except UniqueViolation:
                    figures[f"{label}_duplicate_refused"] = True
                else:
                    raise AssertionError("a duplicate primary key was written")
                assert env.select("keyed").num_rows == before == len(data.cols["id"])
            finally:
                env.close()
        ratio = figures[f"{label}_keyed_write_p50_ms"] / figures[f"{label}_plain_write_p50_ms"]
        figures[f"{label}_keyed_over_plain_p50"] = round(ratio, 2)
        print(
            f"{label} ({n} rows): write p50 keyed {figures[f'{label}_keyed_write_p50_ms']} ms, "
            f"plain {figures[f'{label}_plain_write_p50_ms']} ms: keyed/plain {ratio:.2f}; "
            f"first keyed write {figures[f'{label}_keyed_first_write_ms']} ms; load keyed "
            f"{figures[f'{label}_keyed_load_s']} s, plain {figures[f'{label}_plain_load_s']} s",
            flush=True,
        )
    growth = figures["full_keyed_write_p50_ms"] / figures["small_keyed_write_p50_ms"]
    figures["keyed_p50_full_over_small"] = round(growth, 2)
    print(f"keyed write p50, {args.bids} rows over a tenth of them: {growth:.2f}", flush=True)
    return figures


def _rows(new: pa.Table) -> list[tuple[Any, ...]]:
    """A step's new bids as row tuples (what a transaction takes), made before the clock."""
    return list(zip(*(new.column(c).to_pylist() for c in BIDS.names), strict=True))


def _one_write(env: Environment, rows: list[tuple[Any, ...]], pairs: list[Any]) -> int:
    """A step's inserts and replacements as one transaction: its timestamp once durable."""
    tx = env.transaction()
    tx.insert("bids", rows)
    tx.update("bids", pairs)
    return tx.commit().timestamp


def ratios(figures: dict[str, Any]) -> None:
    """spate's figures over each peer's of the same run (> 1: spate faster, or fresher)."""
    peers = {"pathway": "pathway", "flink_bt0": "flink (buffer timeout 0)"}
    peers["flink_default"] = "flink (default buffering)"
    for key, name in peers.items():
        theirs = figures.get(f"{key}_sustained_updates_per_s")
        if not theirs:
            continue
        waiting = figures["sustained_updates_per_s"] / theirs
        pipelined = figures["sustained_pipelined_updates_per_s"] / theirs
        fresher = figures[f"{key}_visible_p50_ms"] / figures["visible_p50_ms"]
        one = figures["sustained_one_write_updates_per_s"] / theirs
        fresher_one = figures[f"{key}_visible_p50_ms"] / figures["one_write_visible_p50_ms"]
        figures[f"ratio_vs_{key}"] = {
            "sustained_waiting": round(waiting, 2),
            "sustained_waiting_one_write_per_step": round(one, 2),
            "sustained_pipelined": round(pipelined, 2),
            "visible_p50_theirs_over_ours": round(fresher, 2),
            "visible_p50_theirs_over_ours_one_write_per_step": round(fresher_one, 2),
        }
        print(
            f"spate / {name}: sustained {waiting:.2f}x (two writes per step, waiting), "
            f"{one:.2f}x (one write per step, waiting), {pipelined:.2f}x (pipelined); write -> "
            f"visible p50 theirs / ours {fresher:.2f} (two writes), {fresher_one:.2f} (one)",
            flush=True,
        )


def bids_table(rows: list[tuple[int, ...]]) -> pa.Table:
    """Bid rows (tuples in ``BIDS`` order) as an int64 Arrow table."""
    return pa.table(
        {c: pa.array([r[i] for r in rows], pa.int64()) for i, c in enumerate(BIDS.names)}
    )


def pathway_peer_run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The same steps, retractions included, through Pathway (bench/_pathway.py)."""
    print("pathway...", flush=True)
    peer = Data(args.bids, args.auctions, args.seed)
    initial = peer.table()

    def step(k: int) -> tuple[pa.Table, pa.Table, pa.Table]:
        new, pairs = peer.step(k)
        return new, bids_table([a for a, _ in pairs]), bids_table([b for _, b in pairs])

    def final() -> set[tuple[Any, ...]]:
        expected, _ = duckdb_view(peer.table(), peer.auctions)
        return set(expected)

    return pathway_peer(
        initial, peer.auctions, step, final, marker_auction=MARKER, steps=args.steps, work=work
    )


def flink_peer_run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The same steps, retractions included, through Flink SQL (bench/_flink.py)."""
    print("flink...", flush=True)
    peer = Data(args.bids, args.auctions, args.seed)
    initial = peer.table()
    view_rows = sum(duckdb_view(initial, peer.auctions)[0].values())

    def step(k: int) -> tuple[pa.Table, pa.Table, pa.Table]:
        new, pairs = peer.step(k)
        return new, bids_table([a for a, _ in pairs]), bids_table([b for _, b in pairs])

    def final() -> set[tuple[Any, ...]]:
        expected, _ = duckdb_view(peer.table(), peer.auctions)
        return set(expected)

    return flink_peer(
        initial,
        peer.auctions,
        step,
        final,
        marker_auction=MARKER,
        view_rows=view_rows,
        steps=args.steps,
        work=work,
    )


def streaming_peer(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The same steps through Spark Structured Streaming, as inserts (bench/_streaming.py)."""
    print("spark structured streaming (inserts only)...", flush=True)
    peer = Data(args.bids, args.auctions, args.seed)
    initial = peer.table()

    def step(k: int) -> pa.Table:
        new, pairs = peer.step(k)
        return pa.concat_tables([new, bids_table([b for _, b in pairs])])

    return structured_streaming(
        initial,
        peer.auctions,
        step,
        marker_auction=MARKER,
        marker_price=lambda k: 10**12 + k,
        steps=args.steps,
        work=work,
    )


def run(env: Environment, data: Data, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "bids": args.bids,
        "auctions": args.auctions,
        "updates_per_step": STEP_NEW + STEP_REPLACED,
        "steps": args.steps,
        "seed": args.seed,
        "load_avg_start": os.getloadavg()[0],
        "note": "2 shared cores: absolute times vary 2-3x with the load (load_avg_*)",
    }
    env.create_cluster("c", replicas=1)
    env.create_table("bids", BIDS)
    env.create_table("auctions", AUCTIONS)
    t = time.perf_counter()
    env.insert("auctions", data.auctions)
    bids = data.table()
    for start in range(0, bids.num_rows, 250_000):
        env.insert("bids", bids.slice(start, 250_000))
    load_s = time.perf_counter() - t
    rows = bids.num_rows + data.auctions.num_rows
    figures["load_s"] = round(load_s, 2)
    figures["load_rows_per_s"] = round(rows / load_s)
    print(f"load: {rows} rows in {load_s:.1f} s ({rows / load_s:,.0f} rows/s)", flush=True)

    best = env.get("bids").reduce(["auction"], top=max_(col("price")))
    view = best.join(env.get("auctions"), on=[("auction", "id")]).project(0, 1, 3, 4)
    env.create_materialized_view("best", view, cluster="c")
    t = time.perf_counter()
    env.wait_hydrated(timeout=1800)
    figures["hydrate_s"] = round(time.perf_counter() - t, 2)
    print(f"hydrated in {figures['hydrate_s']} s", flush=True)
    obs = Observer(env)
    obs.start()

    ins, upd, both, visible = [], [], [], []
    traced: list[StepTimes] = []
    k = 0
    for _ in range(args.steps):
        k += 1
        new, pairs = data.step(k)
        t0_ns = time.time_ns()
        t0 = time.perf_counter()
        env.insert("bids", new)
        t1 = time.perf_counter()
        ts = env.update("bids", pairs).timestamp
        t2 = time.perf_counter()
        t2_ns = time.time_ns()
        seen = obs.wait_for(ts)
        traced.append(StepTimes(t0_ns, ts, t2_ns, obs.seen_ns))
        ins.append(t1 - t0)
        upd.append(t2 - t1)
        both.append(t2 - t0)
        visible.append(seen - t0)
        print(
            f"step {k}: insert {ins[-1] * 1000:.0f} ms, update {upd[-1] * 1000:.0f} ms, "
            f"visible after {visible[-1] * 1000:.0f} ms",
            flush=True,
        )
    for name, samples in (("insert", ins), ("update", upd), ("write", both), ("visible", visible)):
        figures[f"{name}_p50_ms"] = round(pct(samples, 0.5) * 1000, 1)
        figures[f"{name}_p99_ms"] = round(pct(samples, 0.99) * 1000, 1)
    print(
        f"steps: write call p50 {figures['write_p50_ms']} ms p99 {figures['write_p99_ms']} ms "
        f"(update alone p50 {figures['update_p50_ms']} ms); write -> visible p50 "
        f"{figures['visible_p50_ms']} ms p99 {figures['visible_p99_ms']} ms",
        flush=True,
    )
    stages = breakdown(work / "latency.trace", traced)
    figures["visible_breakdown_ms"] = {
        name.strip(): round(at, 1) for name, at, _ in stages if name != OFF_PATH
    }
    print("write -> visible, stage by stage (the steps above):", flush=True)
    print(format_table(stages), flush=True)

    # The same steps as one write each, as the peers take a step (one changelog file, one
    # batch): the step's inserts and replacements in one transaction, at one timestamp.
    one: list[float] = []
    one_visible: list[float] = []
    one_traced: list[StepTimes] = []
    for _ in range(args.steps):
        k += 1
        new, pairs = data.step(k)
        rows = _rows(new)
        t0_ns = time.time_ns()
        t0 = time.perf_counter()
        ts = _one_write(env, rows, pairs)
        t1 = time.perf_counter()
        t1_ns = time.time_ns()
        seen = obs.wait_for(ts)
        one_traced.append(StepTimes(t0_ns, ts, t1_ns, obs.seen_ns))
        one.append(t1 - t0)
        one_visible.append(seen - t0)
    for name, samples in (("one_write", one), ("one_write_visible", one_visible)):
        figures[f"{name}_p50_ms"] = round(pct(samples, 0.5) * 1000, 1)
        figures[f"{name}_p99_ms"] = round(pct(samples, 0.99) * 1000, 1)
    print(
        f"steps as one write (a transaction of the step's inserts and replacements): write call "
        f"p50 {figures['one_write_p50_ms']} ms p99 {figures['one_write_p99_ms']} ms; write -> "
        f"visible p50 {figures['one_write_visible_p50_ms']} ms p99 "
        f"{figures['one_write_visible_p99_ms']} ms",
        flush=True,
    )
    stages = breakdown(work / "latency.trace", one_traced)
    figures["one_write_visible_breakdown_ms"] = {
        name.strip(): round(at, 1) for name, at, _ in stages if name != OFF_PATH
    }
    print("write -> visible, stage by stage (the steps as one write each):", flush=True)
    print(format_table(stages), flush=True)

    # The steps are made before the clock starts (as for the pipelined run and the peers):
    # making one moves the million-row numpy columns of the live bids, tens of ms.
    steps = [data.step(k + 1 + i) for i in range(args.steps)]
    k += args.steps
    t0 = time.perf_counter()
    ts = 0
    for new, pairs in steps:
        env.insert("bids", new)
        ts = env.update("bids", pairs).timestamp
    obs.wait_for(ts)
    sustained = args.steps * (STEP_NEW + STEP_REPLACED) / (time.perf_counter() - t0)
    figures["sustained_updates_per_s"] = round(sustained)
    print(
        f"sustained: {sustained:,.0f} updates/s ({args.steps} steps back to back, each call "
        "waiting for its acknowledgement)",
        flush=True,
    )

    # The same, each step one write (a transaction), each waiting for its acknowledgement.
    one_steps = [
        (_rows(new), pairs) for new, pairs in (data.step(k + 1 + i) for i in range(args.steps))
    ]
    k += args.steps
    t0 = time.perf_counter()
    for rows, pairs in one_steps:
        ts = _one_write(env, rows, pairs)
    obs.wait_for(ts)
    sustained_one = args.steps * (STEP_NEW + STEP_REPLACED) / (time.perf_counter() - t0)
    figures["sustained_one_write_updates_per_s"] = round(sustained_one)
    print(
        f"sustained, one write per step: {sustained_one:,.0f} updates/s ({args.steps} steps back "
        "to back, each a transaction waiting for its acknowledgement)",
        flush=True,
    )

    # The same, with the writes pipelined: each call returns at once, successive writes share
    # group commits; every write is acknowledged (durable) before the figure is taken.
    steps = [data.step(k + 1 + i) for i in range(args.steps)]
    k += args.steps
    t0 = time.perf_counter()
    with env.pipeline() as p:
        for new, pairs in steps:
            p.insert("bids", new)
            last = p.update("bids", pairs)
    ts = last.result().timestamp
    obs.wait_for(ts)
    pipelined = args.steps * (STEP_NEW + STEP_REPLACED) / (time.perf_counter() - t0)
    figures["sustained_pipelined_updates_per_s"] = round(pipelined)
    print(
        f"sustained, pipelined: {pipelined:,.0f} updates/s ({args.steps} steps back to back, "
        "writes not waiting for each other; all acknowledged and visible)",
        flush=True,
    )

    expected, duck_s = duckdb_view(data.table(), data.auctions)
    figures["duckdb_recompute_s"] = round(duck_s, 3)
    figures["view_rows"] = sum(expected.values())
    print(f"duckdb recompute: {duck_s * 1000:.0f} ms ({figures['view_rows']} rows)", flush=True)
    read = env.select("best")  # strict: observes every write above
    got = Counter(tuple(r.values()) for r in read.to_pylist())
    with obs.cond:
        observed = Counter(obs.view)
    figures["final_view_equals_duckdb"] = got == expected and observed == expected
    if not figures["final_view_equals_duckdb"]:
        figures["final_view_mismatch"] = (
            f"the view differs from the DuckDB recompute: read {sum(got.values())} rows, "
            f"subscribe {sum(observed.values())}, expected {sum(expected.values())}; e.g. "
            f"{list((got - expected).items())[:3]} / {list((expected - got).items())[:3]}"
        )
    else:
        print("final view equals the DuckDB recompute (read and subscribe)", flush=True)
    return figures


if __name__ == "__main__":
    main()
