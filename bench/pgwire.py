"""Benchmark: point lookups on an indexed view through the PostgreSQL wire protocol.

One environment (a cluster with one replica, Spark ``local[2]``), a table of ``--rows`` rows,
a materialized view of it with an index on ``id``. The same random point lookups run

* through ``spate serve``'s server with psycopg (``SELECT * FROM items_mv WHERE id = %s``,
  prepared; the session reads serializably), and
* through ``Environment.select`` of the same filter plan (``isolation="serializable"``), the
  baseline, in the same process,

alternating in rounds so that both see the same machine load. Reported: queries/s, p50/p99 of
each, and the ratio of the wire's throughput to the baseline's (target >= 0.5). A lookup by
the index key is an index peek with the key as a literal constraint on both paths (no Spark
job); the same comparison is also made for a read of a small indexed view as a whole
(``SELECT * FROM small_mv``, a peek of its whole index). Results go to
``bench/results/pgwire.json``.

With ``--postgres`` (``SPATE_TEST_POSTGRES_URL``) the same lookups also run against PostgreSQL
in the same run (a primary-key lookup of a table of the same rows there): one connection with a
prepared statement (queries/s, target >= 0.5x PostgreSQL's), then ``--clients`` connections at
once, ``--per-client`` lookups each (total queries/s and p99; target >= 5,000 q/s, p99 <= 20 ms).
Each of these clients runs in a process of its own, as real clients do: in the server's process
their Python would contend with the server's for the interpreter lock, and be measured with it.
The one-connection lookups run three times for each system: placed by the scheduler, then with
the client and the server (spate's loop thread, PostgreSQL's backend process) on one CPU, then
on two (:data:`_PLACEMENTS`): a round trip between two CPUs of this virtual machine costs far
more than on one, and the scheduler chooses either from one run to the next.

``--case copy`` measures ``COPY t FROM STDIN`` instead (no cluster, no JVM): ``--copy-rows``
rows (``id bigint PRIMARY KEY, v text, x double precision``) sent with psycopg's
``cursor.copy``, into spate's server and into the PostgreSQL at ``--postgres``
(``SPATE_TEST_POSTGRES_URL``), alternately: once with ``write_row`` (psycopg encodes every
row: the client's share of the time is large) and once as text-format lines already encoded,
in 1 MiB ``write`` calls (the servers' share). Reported: rows/s of each, and spate's as a
ratio of PostgreSQL's. Results go to ``bench/results/pgwire_copy.json``.

``--case big-statement`` measures what one client's huge statement costs the others: ``spate
serve``'s server (an environment without clusters, in a process of its own) answers 10 sessions
running ``SELECT 1`` back to back (in another process) while the bench sends 10 MiB statements
(``SELECT length('xxx…')``, simple and extended protocol in turn), and, as the baseline in the
same run, without them. Reported: p50/p99 of ``SELECT 1`` in both (target: p99 <= 50 ms beside
the big statements) and how long each big statement took. Results go to
``bench/results/pgwire_big_statement.json``.

    python -m bench.pgwire [--rows N] [--lookups N] [--rounds N] [--seed S]
    python -m bench.pgwire --case copy [--copy-rows N] [--rounds N] [--postgres URL]
    python -m bench.pgwire --case big-statement [--rounds N] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import psycopg

from bench._results import write_result
from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.plan.builder import col, lit
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT


def _stats(latencies: list[float], elapsed: float) -> dict[str, float]:
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
    return {
        "queries": len(latencies),
        "qps": round(len(latencies) / elapsed, 2),
        "p50_ms": round(q[49] * 1000, 2),
        "p99_ms": round(q[98] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=10, help="per round and path")
    parser.add_argument("--reads", type=int, default=200, help="index reads per round and path")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--case", choices=["lookups", "copy", "big-statement"], default="lookups")
    parser.add_argument("--seconds", type=float, default=8.0, help="per big-statement phase")
    parser.add_argument("--copy-rows", type=int, default=1_000_000)
    parser.add_argument("--postgres", default=os.environ.get("SPATE_TEST_POSTGRES_URL"))
    parser.add_argument("--clients", type=int, default=16, help="lookups: concurrent clients")
    parser.add_argument("--per-client", type=int, default=200, help="lookups per client")
    parser.add_argument("--single", type=int, default=5000, help="lookups on one connection")
    args = parser.parse_args()
    if args.case == "copy":
        _copy_main(args)
        return
    if args.case == "big-statement":
        _big_statement_main(args)
        return
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}")
    load_start = round(os.getloadavg()[0], 1)  # the machine's load, recorded with the figures
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        env = Environment.open(Path(tmp) / "data")
        if not hasattr(env, "sql"):
            env.close()
            raise SystemExit("this build has no Environment.sql: nothing to serve")
        try:
            figures = _run(env, args, rng)
        finally:
            env.close()
    figures["seed"] = seed
    figures["load_average_1m"] = {"start": load_start, "end": round(os.getloadavg()[0], 1)}
    path = write_result("pgwire", figures)
    print(f"wrote {path}")


def _run(env: Environment, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    env.create_cluster("c", replicas=["r1"])
    env.create_table("items", RelationDesc.of(("id", INT64, False), ("v", TEXT)))
    env.insert("items", [(i, f"value {i}") for i in range(args.rows)])
    env.create_materialized_view("items_mv", env.get("items"), cluster="c")
    env.create_index("items_by_id", on="items_mv", key=["id"], cluster="c")
    env.create_table("small", RelationDesc.of(("k", INT64, False), ("v", TEXT)))
    env.insert("small", [(i, f"v{i}") for i in range(10)])
    env.create_materialized_view("small_mv", env.get("small"), cluster="c")
    env.create_index("small_by_k", on="small_mv", key=["k"], cluster="c")
    env.wait_hydrated(timeout=600)  # the indexes answer (until then, persist would)
    assert env.select("items_mv", timeout=600).num_rows == args.rows
    assert env.select("small_mv", timeout=600).num_rows == 10
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    wire: list[float] = []
    base: list[float] = []
    wire_time = base_time = 0.0
    wire_reads: list[float] = []
    base_reads: list[float] = []
    wire_reads_time = base_reads_time = 0.0
    try:
        dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=spate sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET transaction_isolation = 'serializable'")
            for r in range(args.rounds):
                keys = [rng.randrange(args.rows) for _ in range(args.lookups)]
                started = time.perf_counter()
                for k in keys:
                    t0 = time.perf_counter()
                    got = conn.execute(
                        "SELECT * FROM items_mv WHERE id = %s", (k,), prepare=True
                    ).fetchall()
                    wire.append(time.perf_counter() - t0)
                    assert got == [(k, f"value {k}")], got
                wire_time += time.perf_counter() - started
                started = time.perf_counter()
                for k in keys:
                    t0 = time.perf_counter()
                    table = env.select(
                        env.get("items_mv").filter(col("id").eq(lit(k))),
                        isolation="serializable",
                    )
                    base.append(time.perf_counter() - t0)
                    assert table.to_pylist() == [{"id": k, "v": f"value {k}"}]
                base_time += time.perf_counter() - started
                started = time.perf_counter()
                for _ in range(args.reads):
                    t0 = time.perf_counter()
                    assert len(conn.execute("SELECT * FROM small_mv").fetchall()) == 10
                    wire_reads.append(time.perf_counter() - t0)
                wire_reads_time += time.perf_counter() - started
                started = time.perf_counter()
                for _ in range(args.reads):
                    t0 = time.perf_counter()
                    assert env.select("small_mv", isolation="serializable").num_rows == 10
                    base_reads.append(time.perf_counter() - t0)
                base_reads_time += time.perf_counter() - started
                print(f"round {r + 1}/{args.rounds}: lookups wire {_stats(wire, wire_time)}")
                print(f"             lookups select {_stats(base, base_time)}")
                print(f"             index reads wire {_stats(wire_reads, wire_reads_time)}")
                print(f"             index reads select {_stats(base_reads, base_reads_time)}")
        versus = _versus_postgres(dsn, args, rng, _placer(server)) if args.postgres else None
    finally:
        server.close()
    w, b = _stats(wire, wire_time), _stats(base, base_time)
    wr, br = _stats(wire_reads, wire_reads_time), _stats(base_reads, base_reads_time)
    ratio = round(w["qps"] / b["qps"], 3)
    ratio_reads = round(wr["qps"] / br["qps"], 3)
    print(f"point lookups: psycopg {w}, Environment.select {b}, ratio {ratio} (target >= 0.5)")
    print(f"index reads: psycopg {wr}, Environment.select {br}, ratio {ratio_reads}")
    return {
        "rows": args.rows,
        "point_lookups": {"psycopg": w, "environment_select": b, "ratio_qps": ratio},
        "index_reads_10_rows": {"psycopg": wr, "environment_select": br, "ratio_qps": ratio_reads},
        "target_ratio": 0.5,
        **({"versus_postgres": versus} if versus else {}),
    }


def _placer(server: ServerThread) -> Callable[[int], None]:
    """Places ``server``'s loop thread (which answers the lookups) on a CPU; ``-1``: any."""
    every = os.sched_getaffinity(0)

    def place(cpu: int) -> None:
        os.sched_setaffinity(server.native_id, every if cpu < 0 else {cpu})

    return place


_LOOKUP = "SELECT * FROM items_mv WHERE id = %s"
_PG_LOOKUP = "SELECT * FROM items WHERE id = %s"


_CLIENT = """
import json, os, sys, time
import psycopg
dsn, sql, setup, keys = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
client_cpu, backend_cpu = int(sys.argv[5]), int(sys.argv[6])
with psycopg.connect(dsn, autocommit=True) as conn:
    for stmt in setup:
        conn.execute(stmt)
    if client_cpu >= 0:
        os.sched_setaffinity(0, {client_cpu})
    if backend_cpu >= 0:  # PostgreSQL's backend process of this connection
        os.sched_setaffinity(conn.execute("SELECT pg_backend_pid()").fetchone()[0], {backend_cpu})
    conn.execute(sql, (keys[0],), prepare=True).fetchall()
    print("ready", flush=True)
    at = float(sys.stdin.readline())  # every client starts at this time
    time.sleep(max(0.0, at - time.monotonic()))
    lat = []
    started = time.monotonic()
    for k in keys:
        t0 = time.perf_counter()
        got = conn.execute(sql, (k,), prepare=True).fetchall()
        lat.append(time.perf_counter() - t0)
        assert got == [(k, f"value {k}")], got
    ended = time.monotonic()
print(json.dumps({"started": started, "ended": ended, "latencies": lat}))
"""
"""One client: a connection, its setup statements and a prepared lookup of each key, in a
process of its own (as a real client is: never in the server's process, where its Python would
share the server's interpreter lock); it reports the monotonic clock's start and end (one clock
for every process) and each lookup's latency (s). A CPU number ``>= 0`` places the client's
process on that CPU, or PostgreSQL's backend process of its connection (``pg_backend_pid()``)."""


def _lookups(
    dsn: str,
    sql: str,
    keys: list[int],
    setup: list[str],
    client_cpu: int = -1,
    backend_cpu: int = -1,
) -> list[float]:
    """Latencies (s) of a prepared lookup of each key on one new connection (in a client
    process of its own, on ``client_cpu`` when ``>= 0``; PostgreSQL's backend on
    ``backend_cpu`` when ``>= 0``)."""
    latencies, _ = _concurrent(dsn, sql, [keys], setup, client_cpu, backend_cpu)
    return latencies


def _concurrent(
    dsn: str,
    sql: str,
    keys: list[list[int]],
    setup: list[str],
    client_cpu: int = -1,
    backend_cpu: int = -1,
) -> tuple[list[float], float]:
    """Every client's lookups at once, one connection and one process each: latencies and
    seconds overall (from the first client's start to the last one's end)."""
    import json
    import subprocess
    import sys

    cpus = [str(client_cpu), str(backend_cpu)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CLIENT, dsn, sql, json.dumps(setup), json.dumps(k), *cpus],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in keys
    ]
    try:
        for p in procs:  # every client connected and prepared before any starts
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a client failed before its lookups (exit {p.wait(60)})")
        at = time.monotonic() + 0.5  # a start time: not each process's wake-up from a pipe
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"{at}\n")
            p.stdin.flush()
        reports = []
        for p in procs:
            out, _ = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"a client failed (exit {p.returncode})")
            reports.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    elapsed = max(r["ended"] for r in reports) - min(r["started"] for r in reports)
    return [x for r in reports for x in r["latencies"]], elapsed


def _versus(spate: list[float], postgres: list[float]) -> dict[str, Any]:
    """Both systems' one-connection figures from their latencies, and the ratio of rates."""
    got: dict[str, Any] = {"spate": _stats(spate, sum(spate))}
    got["postgres"] = _stats(postgres, sum(postgres))
    got["ratio_qps"] = round(got["spate"]["qps"] / got["postgres"]["qps"], 3)
    return got


_PLACEMENTS: Final = {"same_core": (0, 0), "separate_cores": (0, 1)}
"""Where one connection's client and server run (CPU numbers), for both systems alike. A
synchronous round trip between two processes costs much more when they are on different CPUs
of this virtual machine (PostgreSQL: ~43k lookups/s on one CPU, ~12k across two), and left
to the scheduler the two land either way from one run to the next (PostgreSQL's one-connection
rate moved 12k–38k between runs), so each placement is measured for each system."""


def _versus_postgres(
    dsn: str, args: argparse.Namespace, rng: random.Random, place_server: Callable[[int], None]
) -> dict[str, Any]:
    """``place_server(cpu)`` places the thread that answers spate's lookups on a CPU (``-1``:
    on any)."""
    schema = f"bench_pgwire_{os.getpid()}"
    pg_setup = [f"SET search_path = {schema}"]
    sp_setup = ["SET transaction_isolation = 'serializable'"]
    with psycopg.connect(args.postgres, autocommit=True) as pg:
        pg.execute(f"CREATE SCHEMA {schema}")
        try:
            pg.execute(f"CREATE TABLE {schema}.items (id bigint PRIMARY KEY, v text)")
            with pg.cursor() as cur, cur.copy(f"COPY {schema}.items FROM STDIN") as copy:
                for i in range(args.rows):
                    copy.write_row((i, f"value {i}"))
            pg.execute(f"ANALYZE {schema}.items")
            single = [rng.randrange(args.rows) for _ in range(args.single)]
            s_lat = _lookups(dsn, _LOOKUP, single, sp_setup)
            p_lat = _lookups(args.postgres, _PG_LOOKUP, single, pg_setup)
            placed: dict[str, dict[str, Any]] = {}
            if len(os.sched_getaffinity(0)) >= 2:
                for name, (client, server) in _PLACEMENTS.items():
                    place_server(server)
                    try:
                        s_placed = _lookups(dsn, _LOOKUP, single, sp_setup, client)
                    finally:
                        place_server(-1)
                    p_placed = _lookups(args.postgres, _PG_LOOKUP, single, pg_setup, client, server)
                    placed[name] = _versus(s_placed, p_placed)
            many = [[rng.randrange(args.rows) for _ in range(args.per_client)]] * args.clients
            s_many, s_el = _concurrent(dsn, _LOOKUP, many, sp_setup)
            p_many, p_el = _concurrent(args.postgres, _PG_LOOKUP, many, pg_setup)
        finally:
            pg.execute(f"DROP SCHEMA {schema} CASCADE")
    one = _versus(s_lat, p_lat)
    conc: dict[str, Any] = {"spate": _stats(s_many, s_el), "postgres": _stats(p_many, p_el)}
    conc["ratio_qps"] = round(conc["spate"]["qps"] / conc["postgres"]["qps"], 3)
    print(f"one connection, prepared, placed by the scheduler: {one} (target ratio >= 0.5)")
    for name, got in placed.items():
        print(f"one connection, prepared, {name.replace('_', ' ')}: {got}")
    print(f"{args.clients} connections: {conc} (target >= 5000 q/s, p99 <= 20 ms)")
    return {
        "one_connection": one,
        "one_connection_placed": placed,
        "clients": args.clients,
        "concurrent": conc,
        "targets": {"one_ratio_qps": 0.5, "concurrent_qps": 5000, "concurrent_p99_ms": 20},
    }


def _copy_main(args: argparse.Namespace) -> None:
    if not args.postgres:
        raise SystemExit("--copy needs --postgres URL (or SPATE_TEST_POSTGRES_URL)")
    with tempfile.TemporaryDirectory() as tmp:
        env = Environment.open(Path(tmp) / "data")
        server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
        try:
            dsn = f"host=127.0.0.1 port={server.port} user=bench dbname=spate sslmode=disable"
            figures = _copy_run(dsn, args.postgres, args.copy_rows, args.rounds)
        finally:
            server.close()
            env.close()
    write_result("pgwire_copy", figures)


def _copy_once(dsn: str, rows: list[tuple[int, str, float]] | list[bytes], n: int) -> float:
    """Seconds to COPY ``rows`` into a fresh table (created and dropped outside the timing):
    tuples with ``write_row``, or blocks of text-format lines already encoded."""
    table = f"copy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, v text, x double precision)")
        try:
            started = time.perf_counter()
            with conn.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN") as copy:
                for row in rows:
                    if isinstance(row, bytes):
                        copy.write(row)
                    else:
                        copy.write_row(row)
            elapsed = time.perf_counter() - started
            count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert count == (n,), count
        finally:
            conn.execute(f"DROP TABLE {table}")
    return elapsed


def _copy_run(dsn: str, postgres: str, n: int, rounds: int) -> dict[str, Any]:
    rows = [(i, f"value {i}", i * 0.5) for i in range(n)]
    text = "".join(f"{i}\tvalue {i}\t{i * 0.5}\n" for i in range(n)).encode()
    blocks, at = [], 0
    while at < len(text):  # 1 MiB blocks, whole lines
        end = text.find(b"\n", at + (1 << 20)) + 1 or len(text)
        blocks.append(text[at:end])
        at = end
    out: dict[str, Any] = {"rows": n, "rounds": rounds}
    for case, data in (("write_row", rows), ("text_blocks", blocks)):
        spate_s: list[float] = []
        pg_s: list[float] = []
        for r in range(rounds):
            spate_s.append(_copy_once(dsn, data, n))
            pg_s.append(_copy_once(postgres, data, n))
            print(
                f"{case} round {r + 1}/{rounds}: spate {n / spate_s[-1]:,.0f} rows/s, "
                f"PostgreSQL {n / pg_s[-1]:,.0f} rows/s"
            )
        spate_rate, pg_rate = n / statistics.median(spate_s), n / statistics.median(pg_s)
        ratio = round(spate_rate / pg_rate, 3)
        print(
            f"COPY FROM STDIN of {n:,} rows ({case}, text format): spate "
            f"{spate_rate:,.0f} rows/s, PostgreSQL {pg_rate:,.0f} rows/s, ratio {ratio}"
        )
        out[case] = {
            "spate_rows_per_s": round(spate_rate),
            "postgres_rows_per_s": round(pg_rate),
            "spate_seconds": [round(x, 2) for x in spate_s],
            "postgres_seconds": [round(x, 2) for x in pg_s],
            "ratio": ratio,
        }
    return out


# --- big-statement ---------------------------------------------------------------------------

_SERVER = """
import sys, pathlib
from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
env = Environment.open(pathlib.Path(sys.argv[1]) / "data")
server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
print(server.port, flush=True)
sys.stdin.read()
server.close()
env.close()
"""

_CLIENTS = """
import json, sys, threading, time
import psycopg
dsn, seconds = sys.argv[1], float(sys.argv[2])
out = [[] for _ in range(10)]
def run(lat):
    with psycopg.connect(dsn, autocommit=True) as c:
        for _ in range(5):  # the session's first statements set it up: not measured
            c.execute("SELECT 1").fetchall()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            c.execute("SELECT 1").fetchall()
            lat.append(time.perf_counter() - t0)
threads = [threading.Thread(target=run, args=(lat,)) for lat in out]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps([x for lat in out for x in lat]))
"""


def _latency_stats(latencies: list[float]) -> dict[str, float]:
    q = statistics.quantiles(latencies, n=100)
    return {
        "queries": len(latencies),
        "p50_ms": round(q[49] * 1000, 2),
        "p99_ms": round(q[98] * 1000, 2),
        "max_ms": round(max(latencies) * 1000, 2),
    }


def _big_statement_main(args: argparse.Namespace) -> None:
    import json
    import subprocess
    import sys

    big = "SELECT length('" + "x" * (10 * 1024 * 1024) + "')"
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, tmp], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            dsn = f"host=127.0.0.1 port={port} user=bench dbname=spate sslmode=disable"
            baseline: list[float] = []
            beside: list[float] = []
            big_s: list[float] = []
            for r in range(args.rounds):
                for loaded in (False, True):
                    clients = subprocess.Popen(
                        [sys.executable, "-c", _CLIENTS, dsn, str(args.seconds)],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    if loaded:
                        time.sleep(1.0)  # the sessions are connected
                        end = time.monotonic() + args.seconds - 2.0
                        with (
                            psycopg.connect(dsn, autocommit=True) as ext,
                            psycopg.connect(
                                dsn, autocommit=True, cursor_factory=psycopg.ClientCursor
                            ) as simple,  # psycopg's client cursor: the simple protocol
                        ):
                            n = 0
                            while time.monotonic() < end:
                                t0 = time.perf_counter()
                                c = ext if n % 2 else simple
                                assert c.execute(big).fetchall() == [(10 * 1024 * 1024,)]
                                big_s.append(time.perf_counter() - t0)
                                n += 1
                    out, _ = clients.communicate(timeout=args.seconds + 120)
                    lat = json.loads(out)
                    (beside if loaded else baseline).extend(lat)
                    print(
                        f"round {r} {'beside big statements' if loaded else 'baseline'}: "
                        f"{_latency_stats(lat)}"
                    )
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(60)
    figures = {
        "baseline": _latency_stats(baseline),
        "beside_10_mib_statements": _latency_stats(beside),
        "big_statements": len(big_s),
        "big_statement_s_median": round(statistics.median(big_s), 2) if big_s else None,
        "target_p99_ms": 50,
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
    print(figures)
    path = write_result("pgwire_big_statement", figures)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
