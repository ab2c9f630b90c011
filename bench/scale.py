"""Benchmark: how a step's cost grows with state, on ``local[2]`` and on a standalone cluster.

The workload of ``bench.render`` (the highest bid per auction over bids joined with auctions;
bids generated with numpy and written as Parquet, never through Python objects) at several
sizes of state (default 1M, 10M and 30M bids, a tenth as many auctions), each on two Spark
masters: ``local[2]`` and a standalone master with two workers (one core each) started on this
machine from the PySpark distribution. Per size: hydration (the first step, from the snapshot),
the first 1k-update step after it, the median 1k-update and 100k-update step, and a plain
Spark batch job computing the same view from scratch over the same files, measured interleaved
in the same session. Targets: the 1k
step flat within 1.5x from the smallest to the largest size; hydration <= 1.3x the batch job.

Each master runs in a process of its own (one SparkSession per process)::

    python -m bench.scale [--sizes 1000000,10000000,30000000] [--masters local,standalone]
                          [--reps 3] [--out bench/results/scale.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import RESULTS, _commit
from bench.render import Batch, Profile, Run, machine

TARGET_FLAT = 1.5
TARGET_HYDRATION = 1.3
SMALL, LARGE = 1_000, 100_000


def med(xs: list[float]) -> float:
    return round(statistics.median(xs), 4)


def measure(master: str, sizes: list[int], reps: int, driver_memory: str) -> dict[str, Any]:
    """Every size on ``master`` (this process's one SparkSession)."""
    from spate.render.spark import create_session

    extra = {"spark.executor.memory": "3g", "spark.executor.cores": "1"}
    spark = create_session(master, driver_memory=driver_memory, app_name="bench-scale", extra=extra)
    spark.range(1).count()
    profile = Profile(spark)
    root = Path(tempfile.mkdtemp(prefix="spate-bench-scale-"))
    batch = Batch(spark, root)
    out: dict[str, Any] = {}
    try:
        warm = Run(spark, root, profile, min(sizes[0], 250_000), seed=7, tag="warm-up")
        batch.run([warm.bids_path], [warm.auctions_path])
        warm.hydrate()
        warm.step(SMALL, None)
        warm.drop()
        for n in sizes:
            started = time.perf_counter()
            run = Run(spark, root, profile, n, seed=n, tag=f"bids-{n}")
            generated = time.perf_counter() - started
            files = ([run.bids_path], [run.auctions_path])
            batches = [batch.run(*files)]
            hydration = run.hydrate()
            batches.append(batch.run(*files))
            first = run.step(SMALL, None)  # the first step after the hydration
            small, large = [], []
            for _ in range(reps):  # interleaved with the batch job: load hits both alike
                batches.append(batch.run(*files))
                small.append(run.step(SMALL, "small"))
            run.step(LARGE, None)
            for _ in range(reps):
                large.append(run.step(LARGE, "large"))
            rows = run.check(batch)
            batch_s = med(batches)
            out[str(n)] = {
                "bids": n,
                "auctions": run.n_auctions,
                "generate_s": round(generated, 2),
                "hydration_s": round(hydration, 4),
                "batch_median_s": batch_s,
                "batch_samples_s": [round(x, 4) for x in batches],
                "hydration_ratio": round(hydration / batch_s, 3),
                f"first_step_{SMALL}_s": round(first, 4),
                f"step_{SMALL}_median_s": med(small),
                f"step_{SMALL}_samples_s": [round(x, 4) for x in small],
                f"step_{LARGE}_median_s": med(large),
                f"step_{LARGE}_samples_s": [round(x, 4) for x in large],
                "checked_rows": rows,
            }
            print(
                f"{master} {n:>11,} bids: hydration {hydration:.2f} s, batch {batch_s:.2f} s "
                f"(ratio {hydration / batch_s:.2f}); first step {SMALL:,} {first * 1000:.0f} ms; "
                f"step {SMALL:,} {med(small) * 1000:.0f} ms, "
                f"{LARGE:,} {med(large) * 1000:.0f} ms; correct ({rows:,} rows)",
                flush=True,
            )
            run.drop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    return out


def _child(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    figures = measure(args.master_url, sizes, args.reps, args.driver_memory)
    Path(args.child_out).write_text(json.dumps(figures))


def _run_master(kind: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Run the sizes on ``kind`` in a child process; for ``standalone``, start the cluster."""
    from spate.testing.process import spate_env
    from spate.testing.spark_cluster import start_standalone

    cluster = None
    url = "local[2]"
    if kind == "standalone":
        cluster = start_standalone(root / "spark", cores=1, memory="4g")
        _second_worker(cluster)
        url = cluster.url
    out = root / f"{kind}.json"
    try:
        subprocess.run(
            [sys.executable, "-m", "bench.scale", "--child", "--master-url", url,
             "--sizes", args.sizes, "--reps", str(args.reps), "--child-out", str(out),
             "--driver-memory", args.driver_memory],
            check=True, env=spate_env(), cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
        figures: dict[str, Any] = json.loads(out.read_text())
        return {"master": url if kind == "local" else "standalone, 2 workers x 1 core", **figures}
    finally:
        if cluster is not None:
            cluster.stop()


def _second_worker(cluster: Any) -> None:
    """A second worker (1 core) on the cluster, waited for."""
    from spate.testing.spark_cluster import HOST, spark_home

    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(cluster.root / "conf"),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(cluster.root / "local2"),
        "SPARK_LOG_DIR": str(cluster.root / "logs2"),
        "SPARK_DAEMON_MEMORY": "256m",
    }
    work = cluster.root / "work2"
    work.mkdir(exist_ok=True)
    log = open(cluster.root / "spark-worker-2.log", "wb")  # noqa: SIM115 - the daemon's output
    proc = subprocess.Popen(
        [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
         cluster.url, "--host", HOST, "--cores", "1", "--memory", "4g", "--work-dir", str(work)],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    from spate.testing.spark_cluster import _Daemon

    cluster.daemons.append(_Daemon("spark-worker-2", proc, cluster.root / "spark-worker-2.log"))
    deadline = time.monotonic() + 180
    while int(cluster.master_state().get("aliveworkers", 0)) < 2:
        if time.monotonic() > deadline:
            raise RuntimeError("the second worker did not register")
        time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1000000,10000000,30000000")
    ap.add_argument("--masters", default="local,standalone")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--master-url", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    started = time.perf_counter()
    info = machine()
    root = Path(tempfile.mkdtemp(prefix="spate-bench-scale-"))
    results: dict[str, Any] = {}
    try:
        for kind in args.masters.split(","):
            results[kind] = _run_master(kind, args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sizes = args.sizes.split(",")
    summary: dict[str, Any] = {}
    for kind, figs in results.items():
        first, last = figs[sizes[0]], figs[sizes[-1]]
        growth = last[f"step_{SMALL}_median_s"] / first[f"step_{SMALL}_median_s"]
        worst = max(figs[s]["hydration_ratio"] for s in sizes)
        summary[kind] = {
            f"step_{SMALL}_growth_{sizes[0]}_to_{sizes[-1]}": round(growth, 3),
            "target_growth": TARGET_FLAT,
            "meets_growth_target": growth <= TARGET_FLAT,
            "worst_hydration_ratio": worst,
            "target_hydration_ratio": TARGET_HYDRATION,
            "meets_hydration_target": worst <= TARGET_HYDRATION,
        }
        print(f"{kind}: {summary[kind]}")
    info["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    info["wall_s"] = round(time.perf_counter() - started, 1)
    record = {
        "benchmark": "scale",
        "date": time.strftime("%Y-%m-%d"),
        "commit": _commit(),
        "machine": info,
        "figures": {"by_master": results, "summary": summary, "sizes": sizes},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out} ({info['wall_s']} s)")


if __name__ == "__main__":
    main()
