"""Benchmark: one-off SELECTs with subqueries over small tables, through ``Environment.sql``.

Queries: ``IN``, ``NOT IN``, ``= ANY``/``<> ALL`` in the select list, correlated ``EXISTS``,
a correlated scalar subquery, over tables of ``--rows`` rows. Each query's latency is the median
of ``--reps`` runs (after one unmeasured run).

Baseline, measured in the same run on the same data: the same reads in an environment with
``small_read_updates = 0``, where each one builds a one-off dataflow on the cluster's replica,
hydrates it and peeks it (how every such read ran before small reads were evaluated in the
environment, :mod:`spate.environment.small_reads`). Both environments have one cluster of one
replica, warmed up first; they run one after the other. For scale, a plain read of one table
(a peek of its shard by the replica) is timed in the second.

    python bench/reads.py [--reps 5] [--rows 100]

``--case pgwire`` compares one-off SELECTs over small tables (a 6-row table, tables of
``--big-rows`` (≤ 10k) and 300 rows, no indexes) through ``spate serve``'s server with psycopg
against the same SELECTs in the PostgreSQL at ``--postgres`` (``SPATE_TEST_POSTGRES_URL``), in
the same run, alternating query by query: point, filter, join, aggregate and subquery. Each
query runs ``--reps`` times per system after one unmeasured run; reported: p50 and p99 of each,
and spate's p50 as a multiple of PostgreSQL's (target ≤ 3). Results go to
``bench/results/reads_pgwire.json``.

    python bench/reads.py --case pgwire [--reps 50] [--big-rows 10000] [--postgres URL]

``--case warm`` measures first contact: the seconds from starting ``spate serve`` on a new
data directory to the first answered aggregate over a new table (psycopg: CREATE TABLE,
INSERT, SELECT count/sum; target ≤ 15 s), and from reopening an environment with
``--views`` indexed materialized views (its replicas stopped) to the first serializable
read of one of them (target ≤ 5 s). Results go to ``bench/results/reads_warm.json``.

    python bench/reads.py --case warm [--views 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import write_result
from spate.config import load_settings
from spate.environment.api import Environment

QUERIES = {
    "in": "SELECT x FROM t WHERE x IN (SELECT y FROM s)",
    "not_in": "SELECT x FROM t WHERE x NOT IN (SELECT y FROM s)",
    "any_all": "SELECT x, x = ANY (SELECT y FROM s), x <> ALL (SELECT y FROM s) FROM t",
    "exists": "SELECT x FROM t WHERE EXISTS (SELECT 1 FROM s WHERE s.y = t.x)",
    "scalar": "SELECT x, (SELECT count(*) FROM s WHERE s.y < t.x) FROM t",
}
PLAIN = "SELECT x FROM t"


def _median_ms(env: Environment, sql: str, reps: int) -> tuple[float, Any]:
    out = env.sql(sql)  # unmeasured: plans nothing twice, but the first may wait for a tick
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = env.sql(sql)
        runs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(runs), out


def _run(small_read_updates: int, rows: int, reps: int) -> tuple[dict[str, float], dict[str, Any]]:
    settings = load_settings(small_read_updates=small_read_updates)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Environment.open(Path(tmp) / "data", settings=settings) as env,
    ):
        env.create_cluster("c", replicas=1)
        env.sql("CREATE TABLE w (x bigint); SET cluster = c")
        env.create_index("w_x", on="w", key=["x"], cluster="c")
        env.select("w", cluster="c", timeout=600)  # the replica hydrated an index: Spark is up
        env.sql("CREATE TABLE t (x bigint); CREATE TABLE s (y bigint)")
        values = ", ".join(f"({i})" for i in range(rows)) + ", (NULL)"
        env.sql(f"INSERT INTO t VALUES {values}")
        halves = ", ".join(f"({i})" for i in range(0, rows, 2))
        env.sql(f"INSERT INTO s VALUES {halves}")
        times: dict[str, float] = {}
        answers: dict[str, Any] = {}
        for name, sql in {**QUERIES, "plain": PLAIN}.items():
            ms, out = _median_ms(env, sql, reps)
            times[name] = ms
            answers[name] = sorted(map(str, out.to_pylist()))
            print(f"  small_read_updates={small_read_updates:>6}  {name:>8}: {ms:9.1f} ms")
        return times, answers


PG_QUERIES = {
    "point_6_rows": "SELECT * FROM tiny WHERE id = 3",
    "point_10k": "SELECT * FROM big WHERE id = 4242",
    "filter_10k": "SELECT id, v FROM big WHERE v < 40",
    "join_300x6": "SELECT m.id, t.name FROM mid m JOIN tiny t ON m.g = t.id WHERE m.id < 20",
    "aggregate_10k": "SELECT g, count(*), sum(v) FROM big GROUP BY g",
    "subquery": "SELECT id FROM mid WHERE g IN (SELECT id FROM tiny WHERE name <> 'b')",
    "scalar_subquery": "SELECT count(*) FROM big WHERE g > (SELECT avg(g) FROM mid)",
}
"""One-off SELECTs of ``--case pgwire``: no index on any table, no materialized view."""


def _pg_schema(big_rows: int) -> list[str]:
    big = ", ".join(f"({i}, {i % 10}, {(i * 37) % 1000})" for i in range(big_rows))
    mid = ", ".join(f"({i}, {i % 6})" for i in range(300))
    tiny = ", ".join(f"({i}, '{chr(97 + i)}')" for i in range(6))
    return [
        "CREATE TABLE big (id bigint NOT NULL, g bigint, v bigint)",
        "CREATE TABLE mid (id bigint NOT NULL, g bigint)",
        "CREATE TABLE tiny (id bigint NOT NULL, name text)",
        f"INSERT INTO big VALUES {big}",
        f"INSERT INTO mid VALUES {mid}",
        f"INSERT INTO tiny VALUES {tiny}",
    ]


def _quantiles(runs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(runs, n=100) if len(runs) > 1 else runs * 99
    return {"p50_ms": round(q[49] * 1000, 3), "p99_ms": round(q[98] * 1000, 3)}


def _pgwire_main(args: argparse.Namespace) -> int:
    import psycopg

    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import ServerConfig, ServerThread

    if not args.postgres:
        raise SystemExit("--case pgwire needs --postgres URL (or SPATE_TEST_POSTGRES_URL)")
    load_start = round(os.getloadavg()[0], 1)  # the machine's load, recorded with the figures
    schema = f"bench_reads_{os.getpid()}"
    with tempfile.TemporaryDirectory() as tmp, Environment.open(Path(tmp) / "data") as env:
        env.create_cluster("c", replicas=1)
        env.sql("SET cluster = c")
        for stmt in _pg_schema(args.big_rows):
            env.sql(stmt)
        server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
        dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=spate sslmode=disable"
        try:
            with (
                psycopg.connect(dsn, autocommit=True) as sp,
                psycopg.connect(args.postgres, autocommit=True) as pg,
            ):
                sp.execute("SET cluster = c")
                pg.execute(f"CREATE SCHEMA {schema}")
                pg.execute(f"SET search_path = {schema}")
                try:
                    for stmt in _pg_schema(args.big_rows):
                        pg.execute(stmt)
                    pg.execute("ANALYZE")
                    figures = _pgwire_compare(sp, pg, args.reps)
                finally:
                    pg.execute(f"DROP SCHEMA {schema} CASCADE")
        finally:
            server.close()
    figures["big_rows"] = args.big_rows
    figures["reps"] = args.reps
    figures["load_average_1m"] = {"start": load_start, "end": round(os.getloadavg()[0], 1)}
    write_result("reads_pgwire", figures)
    return 0 if figures["same_answers"] else 1


def _pgwire_compare(sp: Any, pg: Any, reps: int) -> dict[str, Any]:
    out: dict[str, Any] = {"queries": {}}
    same = True
    for name, sql in PG_QUERIES.items():
        answers = []
        runs: dict[str, list[float]] = {"spate": [], "postgres": []}
        for conn in (sp, pg):
            answers.append(sorted(map(repr, conn.execute(sql).fetchall())))  # unmeasured
        for _ in range(reps):
            for who, conn in (("spate", sp), ("postgres", pg)):
                t0 = time.perf_counter()
                conn.execute(sql).fetchall()
                runs[who].append(time.perf_counter() - t0)
        agree = answers[0] == answers[1]
        same = same and agree
        s, p = _quantiles(runs["spate"]), _quantiles(runs["postgres"])
        ratio = round(s["p50_ms"] / max(p["p50_ms"], 1e-3), 1)
        out["queries"][name] = {"spate": s, "postgres": p, "ratio_p50": ratio, "same": agree}
        print(
            f"{name:>16}: spate p50 {s['p50_ms']:8.2f} ms p99 {s['p99_ms']:8.2f} ms | "
            f"PostgreSQL p50 {p['p50_ms']:6.2f} ms p99 {p['p99_ms']:6.2f} ms | x{ratio}"
            + ("" if agree else "  ANSWERS DIFFER")
        )
    ratios = [q["ratio_p50"] for q in out["queries"].values()]
    out["ratio_p50_median"] = statistics.median(ratios)
    out["ratio_p50_max"] = max(ratios)
    out["target_ratio_p50"] = 3
    out["same_answers"] = same
    print(f"p50 ratio: median x{out['ratio_p50_median']}, worst x{out['ratio_p50_max']}")
    return out


def _first_aggregate_after_serve() -> dict[str, float]:
    import socket
    import subprocess

    import psycopg

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        command = [sys.executable, "-m", "spate", "serve", str(Path(tmp) / "data")]
        command += ["--listen", f"127.0.0.1:{port}"]
        proc = subprocess.Popen(
            command,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            dsn = f"host=127.0.0.1 port={port} user=bench dbname=spate sslmode=disable"
            while True:
                try:
                    conn = psycopg.connect(dsn, autocommit=True, connect_timeout=2)
                    break
                except psycopg.OperationalError:
                    if time.perf_counter() - started > 120:
                        raise
                    time.sleep(0.05)
            listening = time.perf_counter() - started
            with conn:
                conn.execute("CREATE TABLE t (k bigint, v bigint)")
                conn.execute("INSERT INTO t SELECT i % 10, i FROM generate_series(1, 1000) i")
                got = conn.execute("SELECT count(*), sum(v) FROM t").fetchall()
                assert got == [(1000, 500500)], got
            answered = time.perf_counter() - started
        finally:
            proc.send_signal(2)
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
    print("".join("    | " + line + "\n" for line in err.splitlines() if "spate:" in line), end="")
    return {"listening_s": round(listening, 2), "first_aggregate_s": round(answered, 2)}


def _first_read_after_reopen(views: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        with Environment.open(data) as env:
            env.create_cluster("c", replicas=1)
            env.sql("SET cluster = c; CREATE TABLE items (id bigint NOT NULL, v text)")
            env.sql("INSERT INTO items SELECT i, 'v' || i FROM generate_series(1, 1000) i")
            for i in range(views):
                env.sql(f"CREATE MATERIALIZED VIEW mv{i} AS SELECT id, v FROM items WHERE id > {i}")
                env.sql(f"CREATE INDEX mv{i}_id ON mv{i} (id)")
            env.wait_hydrated(timeout=600)
        started = time.perf_counter()
        with Environment.open(data) as env:
            opened = time.perf_counter() - started
            session = env.sql_session()
            session.sql("SET transaction_isolation = 'serializable'")
            got = session.sql("SELECT v FROM mv3 WHERE id = 500")
            answered = time.perf_counter() - started
            assert got.to_pylist() == [{"v": "v500"}], got
            plan = [
                r["Optimized Plan"]
                for r in session.sql("EXPLAIN SELECT v FROM mv3 WHERE id = 500").to_pylist()
            ]
            route = next(str(line) for line in plan if str(line).startswith("Read plan"))
    return {"open_s": round(opened, 2), "first_read_s": round(answered, 2), "route": route}


def _warm_main(args: argparse.Namespace) -> int:
    serve = _first_aggregate_after_serve()
    print(f"spate serve on a new data directory: {serve} (target first_aggregate_s <= 15)")
    reopen = _first_read_after_reopen(args.views)
    print(f"reopen with {args.views} indexed views: {reopen} (target first_read_s <= 5)")
    write_result("reads_warm", {"serve_new": serve, "reopen": reopen, "views": args.views})
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--case", choices=["here", "pgwire", "warm"], default="here")
    ap.add_argument("--views", type=int, default=10, help="--case warm: indexed views")
    ap.add_argument("--reps", type=int, default=None, help="measured runs per query")
    ap.add_argument("--rows", type=int, default=100, help="rows of the outer table")
    ap.add_argument("--big-rows", type=int, default=10_000, help="--case pgwire: largest table")
    ap.add_argument("--postgres", default=os.environ.get("SPATE_TEST_POSTGRES_URL"))
    args = ap.parse_args()
    if args.case == "pgwire":
        args.reps = args.reps or 50
        return _pgwire_main(args)
    if args.case == "warm":
        return _warm_main(args)
    args.reps = args.reps or 5
    print("baseline: every read builds a one-off dataflow (small_read_updates = 0)")
    before, before_answers = _run(0, args.rows, args.reps)
    print("small reads evaluated in the environment (the default)")
    after, after_answers = _run(load_settings().small_read_updates, args.rows, args.reps)
    same = all(before_answers[q] == after_answers[q] for q in QUERIES)
    ratios = {q: round(before[q] / after[q], 1) for q in QUERIES}
    figures: dict[str, Any] = {
        "rows": args.rows,
        "reps": args.reps,
        "dataflow_ms": {q: round(before[q], 1) for q in QUERIES},
        "here_ms": {q: round(after[q], 1) for q in QUERIES},
        "speedup": ratios,
        "speedup_median": statistics.median(ratios.values()),
        "plain_table_read_ms": round(after["plain"], 1),
        "same_answers": same,
    }
    for q in QUERIES:
        print(f"{q:>8}: {before[q]:9.1f} ms -> {after[q]:7.1f} ms  (x{ratios[q]})")
    print(f"plain table read: {after['plain']:.1f} ms; same answers: {same}")
    write_result("reads", figures)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
