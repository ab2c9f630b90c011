"""``spate demo``: the main job, on embedded defaults.

1. Open an environment (SQLite consensus, file blobs, Spark ``local[*]`` replicas).
2. A cluster ``auction`` with two compute replicas (separate processes, each a Spark driver).
3. An AUCTION load generator (Nexmark persons, auctions and bids) whose event times follow the
   wall clock.
4. A materialized view ``winning_bids``: for every *open* auction (a temporal filter,
   ``now() < expires``) its highest bid and the seller's name — a join, a top-1 with retractions
   when a higher bid arrives, and a temporal filter that retracts each auction when it closes.
5. An index on it, which reads serve without a Spark job.
6. Once both replicas have hydrated, about a minute of a live view: the top winning bids (a
   serializable read of the index: the latest complete time, no waiting), collections with
   since / upper / lag, replicas with health and hydration. A third of the way in, one replica
   is killed with SIGKILL: the survivor keeps answering, the orchestrator restarts the dead
   one, and it rehydrates (the demo waits for it, up to ``REHYDRATION_WAIT_S``, after the
   minute).
7. A closing summary, including a check that the maintained view equals a recomputation of
   the same plan from its inputs at the same time.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from spate.clock import format_ms
from spate.config import Settings
from spate.environment.api import Environment
from spate.environment.status import EnvironmentStatus
from spate.plan.builder import col, desc, now
from spate.plan.relation import RelationExpr
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource

CLUSTER = "auction"
VIEW = "winning_bids"
INDEX = "winning_bids_by_auction"
INPUTS = ("auction_persons", "auction_auctions", "auction_bids")
HYDRATION_WAIT_S = 180.0
REHYDRATION_WAIT_S = 120.0


def winning_bids_plan(env: Environment) -> RelationExpr:
    """Each open auction's highest bid, with the seller's name."""
    auctions = env.get("auction_auctions")
    bids = env.get("auction_bids")
    persons = env.get("auction_persons")
    open_auctions = auctions.filter(now() < col("expires"))
    best = open_auctions.join(bids, on=[("id", "auction")]).top_k(
        ["id"], order_by=[desc("price")], limit=1
    )
    with_seller = best.select("id", "item_name", "price", "bidder", "seller", "category").join(
        persons, on=[("seller", "id")]
    )
    return with_seller.select("id", "item_name", "price", "bidder", "name", "category").rename(
        id="auction", item_name="item", name="seller"
    )


@dataclass
class DemoReport:
    duration_s: float
    peeks: int = 0
    peek_ms: list[float] = field(default_factory=list)
    peek_errors: int = 0
    shown_rows: int = 0  # the most rows one live read showed
    killed_pid: int | None = None
    restarts: int = 0
    hydrated_after_s: float | None = None
    rehydrated_after_s: float | None = None  # None: none was killed, or it did not rehydrate
    read_lag_ms: list[int] = field(default_factory=list)
    final_rows: int = 0
    matches_recomputation: bool | None = None
    check_ts: int | None = None
    ingested: dict[str, int] = field(default_factory=dict)

    def table(self) -> Table:
        t = Table(title="spate demo: summary", show_header=False)
        t.add_column("what")
        t.add_column("value")
        t.add_row("ran for", f"{self.duration_s:.0f} s")
        hydrated = self.hydrated_after_s
        t.add_row("replicas hydrated after", f"{hydrated:.0f} s" if hydrated is not None else "no")
        for name, n in self.ingested.items():
            t.add_row(f"rows in {name}", f"{n:,}")
        if self.peek_ms:
            p = sorted(self.peek_ms)
            t.add_row(
                "index reads",
                f"{self.peeks} (p50 {statistics.median(p):.0f} ms, "
                f"p99 {p[min(len(p) - 1, int(len(p) * 0.99))]:.0f} ms, {self.peek_errors} failed)",
            )
        if self.read_lag_ms:
            t.add_row(
                "index reads' data lag (p50)", f"{statistics.median(self.read_lag_ms):.0f} ms"
            )
        t.add_row("replica killed", f"pid {self.killed_pid}" if self.killed_pid else "no")
        t.add_row("replica restarts", str(self.restarts))
        after = self.rehydrated_after_s
        if self.killed_pid is None:
            rehydrated = "-"
        elif after is not None:
            rehydrated = f"yes, {after:.0f} s after the kill"
        else:
            rehydrated = f"no (waited {REHYDRATION_WAIT_S:.0f} s)"
        t.add_row("killed replica rehydrated", rehydrated)
        t.add_row(f"{VIEW} rows", str(self.final_rows))
        check = {True: "yes", False: "NO", None: "not checked"}[self.matches_recomputation]
        at = "-" if self.check_ts is None else format_ms(self.check_ts)
        t.add_row(f"{VIEW} == recomputation at {at}", check)
        return t


def _setup(env: Environment, console: Console, *, rate: int) -> None:
    names = set(env.names())
    if CLUSTER not in {c.name for c in env.runtime.catalog.clusters}:
        console.print("[bold]creating[/] cluster auction (2 replicas: Spark drivers)…")
        env.create_cluster(CLUSTER, replicas=["r1", "r2"])
    if "auction" not in names:
        console.print(f"[bold]creating[/] AUCTION load generator ({rate} events/s)…")
        tick_ms = 200
        env.create_source(
            "auction",
            LoadGeneratorSource(
                LoadGenerator.AUCTION,
                tick_interval_ms=tick_ms,
                rows_per_tick=rate * tick_ms // 1000,
            ),
        )
    if VIEW not in names:
        console.print(f"[bold]creating[/] materialized view {VIEW} and its index…")
        env.create_materialized_view(VIEW, winning_bids_plan(env), cluster=CLUSTER)
    if INDEX not in names:
        env.create_index(INDEX, on=VIEW, key=["auction"], cluster=CLUSTER)
    # Ten minutes of history, so that the closing check can read everything at one past time.
    for name in (*INPUTS, VIEW, INDEX):
        env.set_retain_history(name, 600_000)


def _top(env: Environment, status: EnvironmentStatus, report: DemoReport) -> Table:
    t = Table(title=f"{VIEW}: highest bids of open auctions")
    for h in ("auction", "item", "price ($)", "bidder", "seller", "category"):
        t.add_column(h)
    start = time.perf_counter()
    try:
        rows = env.select(
            VIEW, order_by=["-price"], limit=8, timeout=20, isolation="serializable"
        ).to_pylist()
    except Exception as e:  # keep the live view going; the summary counts failures
        report.peek_errors += 1
        t.caption = f"read failed: {e}"
        return t
    report.peeks += 1
    report.peek_ms.append((time.perf_counter() - start) * 1000)
    report.shown_rows = max(report.shown_rows, len(rows))
    upper = status.collection(INDEX).upper.as_option()
    if upper is not None:
        report.read_lag_ms.append(max(0, env.runtime.clock.now_millis() - upper))
    for r in rows:
        t.add_row(
            str(r["auction"]),
            r["item"],
            f"{r['price'] / 100:,.2f}",
            str(r["bidder"]),
            r["seller"],
            str(r["category"]),
        )
    return t


def _hydrated(env: Environment, replica: str | None = None) -> bool:
    """Every (or the named) replica of the cluster is connected and has hydrated everything."""
    replicas = [r for r in env.status().replicas if r.cluster == CLUSTER]
    wanted = [r for r in replicas if replica is None or r.name == replica]
    return bool(wanted) and all(
        r.health == "connected" and r.collections > 0 and r.hydrated == r.collections
        for r in wanted
    )


def _wait(
    env: Environment, live: Live, what: str, timeout_s: float, replica: str | None = None
) -> float | None:
    """Show progress (per replica: its driver starting, then dataflows hydrated) and the
    status until the replicas hydrate; seconds it took (``None``: not in time)."""
    started = time.monotonic()
    bars = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        auto_refresh=False,
    )
    tasks: dict[str, TaskID] = {}
    while (elapsed := time.monotonic() - started) < timeout_s:
        if _hydrated(env, replica):
            return elapsed
        status = env.status()
        for r in status.replicas:
            if r.cluster != CLUSTER or (replica is not None and r.name != replica):
                continue
            if r.name not in tasks:
                tasks[r.name] = bars.add_task(r.name, total=None)
            state = (
                "connecting (Spark driver starting)"
                if r.health != "connected"
                else ("hydrating dataflows")
            )
            bars.update(
                tasks[r.name],
                description=f"replica {r.name}: {state}",
                completed=r.hydrated,
                total=r.collections or None,
            )
        live.update(Group(Panel(f"spate demo — {what}… {elapsed:.0f} s"), bars, *status.tables()))
        time.sleep(1.0)
    return None


def run_demo(
    data_dir: Path | None = None,
    *,
    duration_s: float = 60.0,
    rate: int = 200,
    kill: bool = True,
    console: Console | None = None,
    settings: Settings | None = None,
) -> DemoReport:
    """Run the demo; return what happened (the CLI prints it, tests check it)."""
    console = console or Console()
    own_dir = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="spate-demo-")) if data_dir is None else data_dir
    report = DemoReport(duration_s)
    console.print(f"spate demo: data in [bold]{directory}[/]")
    env = Environment.open(directory, settings=settings)
    try:
        _setup(env, console, rate=rate)
        with Live(console=console, refresh_per_second=2, transient=False) as live:
            report.hydrated_after_s = _wait(
                env, live, "starting the replicas (Spark drivers) and hydrating", HYDRATION_WAIT_S
            )
            killed_at = _live(env, live, report, kill=kill)
            if killed_at is not None:
                waited = _wait(env, live, "waiting for r1 to rehydrate", REHYDRATION_WAIT_S, "r1")
                if waited is not None:
                    report.rehydrated_after_s = time.monotonic() - killed_at
        _finish(env, report, console)
    finally:
        env.close()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)
    console.print(report.table())
    return report


def _live(env: Environment, live: Live, report: DemoReport, *, kill: bool) -> float | None:
    """The live view for ``report.duration_s``; when r1 was killed (monotonic clock)."""
    duration_s = report.duration_s
    started = time.monotonic()
    killed_at: float | None = None
    while (elapsed := time.monotonic() - started) < duration_s:
        if kill and killed_at is None and elapsed >= duration_s / 3:
            pid = env.runtime.orchestrator.pid(f"{CLUSTER}-r1")
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                report.killed_pid = pid
                killed_at = time.monotonic()
        status = env.status()
        note = (
            f"replica r1 killed (pid {report.killed_pid}) at {killed_at - started:.0f} s"
            if killed_at is not None
            else f"replica r1 will be killed at {duration_s / 3:.0f} s"
        )
        live.update(
            Group(
                Panel(f"spate demo — {elapsed:.0f}/{duration_s:.0f} s — {note}"),
                _top(env, status, report),
                *status.tables(),
            )
        )
        time.sleep(1.0)
    return killed_at


def _finish(env: Environment, report: DemoReport, console: Console) -> None:
    for r in env.status().replicas:
        report.restarts += r.restarts
    # The maintained view (through its index) against the same plan computed from scratch by a
    # one-off dataflow over the inputs, both at one timestamp.
    console.print("checking the view against a recomputation from its inputs…")
    # A time every input has reached (the newest complete one): recompute there first (the
    # one-off dataflow holds its inputs there), then wait for the maintained view to reach it.
    uppers = [env.status().collection(n).upper.as_option() for n in INPUTS]
    known = [u for u in uppers if u is not None]
    ts = max(0, min(known) - 1) if known else env.runtime.oracle.read_ts()
    for name in INPUTS:
        report.ingested[name] = env.select(name, as_of=ts, timeout=180).num_rows
    recomputed = env.select(winning_bids_plan(env), as_of=ts, timeout=180).to_pylist()
    maintained = env.select(VIEW, as_of=ts, timeout=180).to_pylist()
    report.check_ts = ts
    report.final_rows = len(maintained)
    report.matches_recomputation = _multiset(maintained) == _multiset(recomputed)


def _multiset(rows: list[dict[str, object]]) -> Counter[tuple[tuple[str, object], ...]]:
    return Counter(tuple(sorted(r.items())) for r in rows)
