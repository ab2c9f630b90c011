"""``spate pipeline run`` vs ``spark-pipelines run`` on the same pipeline and the same inputs.

The test pipeline of tests/pipelines (6 datasets: bronze from Parquet, a filter and a join in
SQL, a group-by, a window and a top-k in Python) over ``--rows`` order rows in files of
``--file-rows``; then ``--rounds`` rounds, each adding a file of ``--change-rows`` rows. Each
engine runs the spec after the first files and after every round; the figure is the wall time
of each run (``spate pipeline run`` leaves its replica running for the next run, as it does by
default; spark-pipelines starts its Spark Connect server each run, as it does). The ratio is
the median round of spark-pipelines over spate's, measured in the same run. Both engines' commands
run with Python's bytecode cache (in the run's temporary directory), as installed packages do:
an environment that sets ``PYTHONDONTWRITEBYTECODE`` (this machine's does) would otherwise have
every spate command compile spate's sources again, while pyspark's come compiled from its wheel.

Then the freshness of ``spate pipeline serve`` over the same data directory: ``--serve-files``
more files of ``--change-rows`` rows, written one at a time (each renamed into the input
directory at once); for each, the time from the rename until a pgwire client sees it in
``bronze_orders`` (its row count) and in ``gold_regions`` (its total of orders, computed from
the files written), as a pgwire client SUBSCRIBEd to each receives their changes (fetched
every 20 ms). Results: bench/results/pipelines.json.

    PYTHONPATH=src .venv/bin/python -m bench.pipelines --rows 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tests.pipelines._example import write_pipeline

from bench._results import write_result

VENV_BIN = Path(sys.executable).parent


def _bytecode_env(env: dict[str, str], cache: Path) -> dict[str, str]:
    """``env`` with Python's bytecode cache on, kept under ``cache`` (module docs)."""
    out = dict(env, PYTHONPYCACHEPREFIX=str(cache))
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def _spate_env(cache: Path) -> dict[str, str]:
    """The environment of the spate commands measured: they run the spate this process
    imported (an absolute PYTHONPATH: the commands run in the pipeline's directory, where a
    relative one would find the installed spate instead), their bytecode kept in ``cache``."""
    import spate

    src = str(Path(spate.__file__).resolve().parents[1])
    parts = [
        str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    path = os.pathsep.join([src, *[p for p in parts if p != src]])
    return _bytecode_env(dict(os.environ, PYTHONPATH=path), cache)


def _orders(path: Path, first_id: int, n: int, customers: int) -> int:
    """Write ``n`` orders at ``path``; how many are paid (each customer exists: all count in
    gold_regions)."""
    import numpy as np

    rng = np.random.default_rng(first_id)
    table = pa.table(
        {
            "order_id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
            "customer_id": pa.array(rng.integers(1, customers + 1, n, dtype=np.int64)),
            "amount": pa.array(rng.integers(1, 500, n, dtype=np.int64)),
            "qty": pa.array(rng.integers(1, 9, n, dtype=np.int32)),
            "status": pa.array(rng.choice(["paid", "paid", "open", "void"], n)),
        }
    )
    tmp = path.with_name("." + path.name)
    pq.write_table(table, tmp)
    tmp.rename(path)
    return int(sum(1 for s in table.column("status").to_pylist() if s == "paid"))


def _customers(root: Path, n: int) -> None:
    regions = ["north", "south", "east", "west"]
    pq.write_table(
        pa.table(
            {
                "customer_id": pa.array(range(1, n + 1), pa.int64()),
                "name": [f"c{i}" for i in range(1, n + 1)],
                "region": [regions[i % 4] for i in range(n)],
            }
        ),
        root / "customers" / "customers.parquet",
    )


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    """The wall time of ``cmd`` and the last line it printed."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"{cmd[:4]} failed: {(proc.stdout + proc.stderr)[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    return time.perf_counter() - t, lines[-1] if lines else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--file-rows", type=int, default=100_000)
    ap.add_argument("--change-rows", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--customers", type=int, default=1_000)
    ap.add_argument("--serve-files", type=int, default=10)
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument(
        "--trace",
        action="store_true",
        help="record latency marks during serve and print where each file's rows waited",
    )
    args = ap.parse_args()
    load_start = os.getloadavg()[0]  # the machine may be shared: the figures say how much
    paid = 0
    with tempfile.TemporaryDirectory(prefix="bench-pipelines-") as tmp:
        roots = {e: Path(tmp) / e for e in ("spate", "spark")}
        for root in roots.values():
            root.mkdir()
            write_pipeline(root)
            _customers(root, args.customers)
        next_id = 1
        for i in range(0, args.rows, args.file_rows):
            for root in roots.values():
                n = _orders(root / "orders" / f"orders-{i:09d}.parquet", next_id,
                            min(args.file_rows, args.rows - i), args.customers)  # fmt: skip
            paid += n
            next_id += args.file_rows
        pycache = Path(tmp) / "pycache"
        spark_env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
        spark_env.pop("PYTHONPATH", None)
        spark_env = _bytecode_env(spark_env, pycache)
        data = Path(tmp) / "spate-data"
        spate_cmd = [sys.executable, "-m", "spate", "pipeline", "run", "pipeline.yml",
                     "--data-dir", str(data)]  # fmt: skip
        spark_cmd = [str(VENV_BIN / "spark-pipelines"), "run", "--spec", "pipeline.yml"]
        spate_env = _spate_env(pycache)
        if args.trace:  # the replica the runs keep records its marks too (serve adopts it)
            spate_env["SPATE_LATENCY_TRACE"] = str(data.parent / "latency-trace.tsv")
        spate_times, spark_times = [], []
        try:
            for r in range(args.rounds + 1):
                if r:
                    for root in roots.values():
                        n = _orders(root / "orders" / f"orders-x{r:05d}.parquet", next_id,
                                    args.change_rows, args.customers)  # fmt: skip
                    paid += n
                    next_id += args.change_rows
                took, said = _timed(spate_cmd, roots["spate"], spate_env)
                spate_times.append(took)
                print(f"  {said}")  # spate's phases
                if not args.skip_spark:
                    # No metastore: each run starts with an empty catalog and Spark refuses a
                    # managed table over an existing location (it recomputes them in full).
                    shutil.rmtree(roots["spark"] / "spark-warehouse", ignore_errors=True)
                    spark_times.append(_timed(spark_cmd, roots["spark"], spark_env)[0])
                line = f"run {r}: spate {spate_times[-1]:.1f} s"
                if spark_times:
                    line += f", spark-pipelines {spark_times[-1]:.1f} s"
                print(line)
            rows = args.rows + args.rounds * args.change_rows
            freshness = _serve_freshness(args, roots["spate"], data, next_id, rows, paid, pycache)
        finally:
            from spate.orchestrator.process import stop_services

            stop_services(data)  # the replica the runs kept, as `spate stop` stops it
    figures: dict[str, object] = {
        "rows": args.rows,
        "file_rows": args.file_rows,
        "change_rows": args.change_rows,
        "rounds": args.rounds,
        "spate_first_s": round(spate_times[0], 2),
        "spate_round_s": [round(t, 2) for t in spate_times[1:]],
        **freshness,
        "load_average_1min": [round(load_start, 1), round(os.getloadavg()[0], 1)],
    }
    if spark_times:
        figures |= {
            "spark_pipelines_first_s": round(spark_times[0], 2),
            "spark_pipelines_round_s": [round(t, 2) for t in spark_times[1:]],
        }
        if args.rounds:
            ratio = statistics.median(spark_times[1:]) / statistics.median(spate_times[1:])
            figures["round_speedup_median"] = round(ratio, 2)
            print(f"per round after the first: spark-pipelines / spate = {ratio:.1f}x")
    # a run without spark-pipelines measures spate alone: kept apart from the comparison
    write_result("pipelines_spate_only" if args.skip_spark else "pipelines", figures)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_freshness(
    args: argparse.Namespace,
    root: Path,
    data: Path,
    next_id: int,
    rows: int,
    paid: int,
    pycache: Path,
) -> dict[str, object]:
    """Write → visible over pgwire, per file, under ``spate pipeline serve`` (module docs)."""
    import psycopg

    port = _free_port()
    env = _spate_env(pycache)
    trace = data.parent / "latency-trace.tsv"
    if args.trace:
        env["SPATE_LATENCY_TRACE"] = str(trace)
    proc = subprocess.Popen(
        [sys.executable, "-m", "spate", "pipeline", "serve", "pipeline.yml", "--data-dir",
         str(data), "--listen", f"127.0.0.1:{port}"],
        cwd=root, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    bronze: list[float] = []
    gold: list[float] = []
    renamed_ns: list[int] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "serving PostgreSQL clients" in line:
                break
        else:
            raise SystemExit(f"spate pipeline serve exited {proc.wait()}")
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
        dsn = f"postgresql://spate@127.0.0.1:{port}/spate"
        with psycopg.connect(dsn) as cb, psycopg.connect(dsn) as cg:
            cb.execute("DECLARE s CURSOR FOR SUBSCRIBE (SELECT order_id FROM bronze_orders)")
            cg.execute("DECLARE s CURSOR FOR SUBSCRIBE (SELECT orders FROM gold_regions)")
            seen = {"bronze": 0, "gold": 0}

            def fetch(c: psycopg.Connection[Any], what: str, weight: Any) -> None:
                for _ts, diff, *row in c.execute("FETCH ALL s WITH (timeout = '0.02s')"):
                    seen[what] += int(diff) * weight(row)

            def poll() -> tuple[int, int]:
                fetch(cb, "bronze", lambda _: 1)
                fetch(cg, "gold", lambda row: int(row[0]))
                return seen["bronze"], seen["gold"]

            deadline = time.monotonic() + 600
            while poll() != (rows, paid):  # the snapshot, in as many batches as it takes
                if time.monotonic() > deadline:
                    raise SystemExit(f"serve starts at {poll()}, not {(rows, paid)}")
            for k in range(args.serve_files):
                path = root / "orders" / f"orders-s{k:05d}.parquet"
                start = time.perf_counter()
                renamed_ns.append(time.time_ns())
                paid += _orders(path, next_id, args.change_rows, args.customers)
                next_id += args.change_rows
                rows += args.change_rows
                got_bronze = got_gold = None
                while got_bronze is None or got_gold is None:
                    n, g = poll()
                    now = time.perf_counter() - start
                    if got_bronze is None and n == rows:
                        got_bronze = now
                    if got_gold is None and g == paid:
                        got_gold = now
                    if now > 120:
                        raise SystemExit(f"file {k} not visible after 120 s: {(n, g)}")
                bronze.append(got_bronze)
                gold.append(got_gold)
                print(f"serve file {k}: visible in bronze {bronze[-1]:.2f} s, "
                      f"gold {gold[-1]:.2f} s")  # fmt: skip
                time.sleep(0.5)
    finally:
        proc.terminate()
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            print("spate pipeline serve did not stop within 120 s of SIGTERM; killed")
            proc.kill()
            proc.wait(30)
    if not gold:
        return {}
    if args.trace:
        _print_trace(trace, renamed_ns)
    p50_b, p50_g = statistics.median(bronze), statistics.median(gold)
    print(f"serve freshness p50: bronze {p50_b:.2f} s, gold {p50_g:.2f} s")
    return {
        "serve_files": args.serve_files,
        "serve_visible_bronze_s": [round(t, 3) for t in bronze],
        "serve_visible_gold_s": [round(t, 3) for t in gold],
        "serve_visible_bronze_p50_s": round(p50_b, 3),
        "serve_visible_gold_p50_s": round(p50_g, 3),
    }


def _print_trace(trace: Path, renamed_ns: list[int]) -> None:
    """For each served file: when (after its rename) serve saw it, inserted it (at ``ts``),
    and each dataflow and subscribe first got past ``ts``; the medians over the files."""
    marks = []
    for line in trace.read_text().splitlines():
        stage, subject, value, wall, _pid = line.split("\t")
        marks.append((int(wall), stage, subject, int(value)))
    marks.sort()
    rows: dict[str, list[float]] = {}
    for start in renamed_ns:
        seen = next((m for m in marks if m[0] >= start and m[1] == "pipeline_file_seen"), None)
        ins = next((m for m in marks if m[0] >= start and m[1] == "pipeline_file_inserted"), None)
        if seen is None or ins is None:
            continue
        ts = ins[3]
        got = {"seen": seen[0], "inserted": ins[0]}
        for wall, stage, subject, value in marks:
            if wall < ins[0] or value <= ts:
                continue
            if stage in ("step_start", "step_end", "subscribe_sent", "subscribe_received"):
                got.setdefault(f"{stage} {subject}", wall)
        for k, wall in got.items():
            rows.setdefault(k, []).append((wall - start) / 1e9)
    print("where a file's rows wait (median s after its rename, over the files):")
    for k, v in sorted(rows.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"  {statistics.median(v):7.3f}  {k}  (n={len(v)})")


if __name__ == "__main__":
    main()
