"""The Flink peer of ``bench/e2e.py``, run inside PyFlink's own virtual environment (it imports
only PyFlink, never spate).

    python _flink_peer.py DIR STEPS MARKER_AUCTION VIEW_ROWS BUFFER_TIMEOUT

A Flink SQL job on a local mini-cluster (parallelism 2; ``BUFFER_TIMEOUT`` is
``execution.buffer-timeout``, e.g. ``0 ms``, or ``default``): the highest bid per auction
joined with its auction, over a changelog file source (``filesystem`` connector, JSON lines of
signed updates, ``diff`` -1 or 1, the directory ``DIR/bids`` monitored every millisecond; the
auctions a bounded file), into a ``print`` sink whose lines this process reads from its own
standard output (the JVM inherits it) as they are printed. ``DIR/bids`` holds the load;
``DIR/steps/step-NNNNN.json`` (``k`` in ``1..2*STEPS``) are renamed into it: 500 new bids and
500 replaced ones (a delete and an insert each), the marker bid (on ``MARKER_AUCTION``) priced
``10**12 + k``. The load is done when the view has ``VIEW_ROWS`` rows and the marker's price;
steps ``1..STEPS`` go one at a time (write -> visible: from the rename until the marker's new
price is printed), the rest back to back (sustained). Prints one JSON object (to the original
standard output): the figures and the final view.

Why signed updates and two aggregates, not a Debezium changelog into ``max(price)``: the file
source reads the files with two readers and keeps no order between files (``scan.parallelism``,
one reader, is not an option of Flink 2.3's ``filesystem`` connector), so a step's delete of a
bid can reach the aggregate before the earlier step's insert of it. Flink's changelog
operators assume their input in order: the group aggregate drops a retraction of a group it has
no state for, and ``MAX`` with retraction takes a value inserted after its retraction (count
-1 -> 0) as the max though it is gone; the final view then differed from DuckDB's (3 rows at
100k bids). Here the bids are an append-only stream of ``(auction, price, diff)``; the inner
aggregate sums the diffs of each ``(auction, price)``, which commutes, and keeps the prices
present (``HAVING sum > 0``); the outer ``MAX`` reads that aggregate's changelog, which is in
order per key (one channel per pair of subtasks). ``tests/bench/test_flink_peer.py`` checks a
delete read before its insert.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

DIR, STEPS, MARKER = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
VIEW_ROWS, BUFFER_TIMEOUT = int(sys.argv[4]), sys.argv[5]
STEP_UPDATES = 1000

# The print sink writes to the JVM's standard output, which it inherits from this process:
# point ours at a pipe read by a thread, and keep the original for the result.
result_out = os.fdopen(os.dup(1), "w")
read_fd, write_fd = os.pipe()
os.dup2(write_fd, 1)
os.close(write_fd)

view: dict[int, tuple[int, int, str]] = {}
marker_top = -1
last_change = time.monotonic()
cond = threading.Condition()


def parse(line: str) -> tuple[str, tuple[int, int, int, str]] | None:
    """``"2> +I[1, 10, 5, c1]"`` -> ``("+I", (1, 10, 5, "c1"))``."""
    start = line.find("[")
    if start < 2 or not line.endswith("]"):
        return None
    kind = line[start - 2 : start]
    a, top, seller, category = (v.strip() for v in line[start + 1 : -1].split(","))
    return kind, (int(a), int(top), int(seller), category)


def reader() -> None:
    global marker_top, last_change
    with os.fdopen(read_fd, "r") as lines:
        for raw in lines:
            got = parse(raw.rstrip("\n"))
            if got is None:
                continue
            kind, (a, top, seller, category) = got
            with cond:
                if kind in ("+I", "+U"):
                    view[a] = (top, seller, category)
                    if a == MARKER:
                        marker_top = max(marker_top, top)
                elif view.get(a) == (top, seller, category):
                    del view[a]
                last_change = time.monotonic()
                cond.notify_all()


def wait(pred: Any, what: str, timeout: float = 1800.0) -> float:
    deadline = time.monotonic() + timeout
    with cond:
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"Flink: {what} not seen in {timeout} s")
            cond.wait(min(left, 1.0))
    return time.perf_counter()


def main() -> None:
    threading.Thread(target=reader, daemon=True).start()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    t0 = time.perf_counter()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", "2")
    if BUFFER_TIMEOUT != "default":
        config.set("execution.buffer-timeout", BUFFER_TIMEOUT)
    env.execute_sql(
        "CREATE TABLE bids (id BIGINT, auction BIGINT, bidder BIGINT, price BIGINT, diff INT) "
        f"WITH ('connector' = 'filesystem', 'path' = '{DIR / 'bids'}', 'format' = 'json', "
        "'source.monitor-interval' = '1 ms')"
    )
    env.execute_sql(
        "CREATE TABLE auctions (id BIGINT, seller BIGINT, category STRING, diff INT) WITH ("
        f"'connector' = 'filesystem', 'path' = '{DIR / 'auctions'}', 'format' = 'json')"
    )
    env.execute_sql(
        "CREATE TABLE best (auction BIGINT, `top` BIGINT, seller BIGINT, category STRING) "
        "WITH ('connector' = 'print')"
    )
    job = env.execute_sql(
        "INSERT INTO best SELECT b.auction, b.`top`, a.seller, a.category FROM "
        "(SELECT auction, max(price) AS `top` FROM "
        "  (SELECT auction, price FROM bids GROUP BY auction, price HAVING sum(diff) > 0) "
        " GROUP BY auction) b "
        "JOIN auctions a ON a.id = b.auction"
    )
    wait(lambda: len(view) >= VIEW_ROWS and marker_top >= 0, "the load")
    load_s = time.perf_counter() - t0

    def write(k: int) -> None:
        name = f"step-{k:05d}.json"
        os.rename(DIR / "steps" / name, DIR / "bids" / name)

    visible = []
    for k in range(1, STEPS + 1):
        t = time.perf_counter()
        write(k)
        visible.append(wait(lambda k=k: marker_top >= 10**12 + k, f"step {k}") - t)
    t = time.perf_counter()
    for k in range(STEPS + 1, 2 * STEPS + 1):
        write(k)
    wait(lambda: marker_top >= 10**12 + 2 * STEPS, "the last step")
    sustained = STEPS * STEP_UPDATES / (time.perf_counter() - t)
    # The marker's file is read; the other subtask may still emit: wait for a quiet second.
    while True:
        with cond:
            quiet = time.monotonic() - last_change
        if quiet >= 1.0:
            break
        time.sleep(1.0 - quiet)
    with cond:
        final = [[a, *row] for a, row in view.items()]
    job.get_job_client().cancel().result()
    visible.sort()
    result_out.write(
        json.dumps(
            {
                "load_s": load_s,
                "visible_p50_ms": visible[round(0.5 * (len(visible) - 1))] * 1000,
                "visible_p99_ms": visible[round(0.99 * (len(visible) - 1))] * 1000,
                "sustained_updates_per_s": sustained,
                "final": final,
            }
        )
        + "\n"
    )
    result_out.flush()
    os._exit(0)  # the JVM's threads would keep the interpreter alive


if __name__ == "__main__":
    main()
