"""Where write -> visible goes: ``bench/e2e.py``'s per-stage table, from the latency marks.

spate records a mark (``spate.persist.latency_trace``) at each stage a write passes through, in
the environment's process and in its replicas', on one wall clock. For each step run one at a
time, :func:`breakdown` finds, from the write's timestamp ``ts`` (the step's update, or its one
write), the first mark of each stage that covers ``ts``:

* ``commit_start`` / ``acknowledged``: the group commit choosing ``ts`` / telling the oracle;
* ``append_start`` / ``blob_written`` / ``cas_done``: each table's append to ``ts + 1`` (the
  blob of its updates, then the consensus compare-and-set), the last table's;
* ``upper_polled``: the replica learning a table's new upper (the last table's);
* ``step_start`` / ``step_end`` of each dataflow with an upper beyond ``ts`` (the view's, then
  the subscribe's, which reads the view's feed on the same replica, or its shard);
* ``subscribe_sent`` / ``subscribe_received``: the subscribe's batch covering ``ts`` written to
  the replica's connection / decoded by the environment's compute controller;
* ``delivered``: the subscribe's change reaching the client;
* off that path, the view's shard appended beyond ``ts`` by the replica (``append_start``,
  ``cas_done``), its gap counted from the view's step end.

The table gives, per stage, the median time after the start of the step's writes, and the
median gap to the stage before it (each a median over the steps: the gaps need not add up).
"""

from __future__ import annotations

import bisect
import os
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Final


@dataclass(frozen=True)
class StepTimes:
    """One step's writes, on the wall clock (ns): started, the update's ``ts``, returned,
    delivered."""

    started_ns: int
    ts: int
    returned_ns: int
    delivered_ns: int


@dataclass(frozen=True)
class _Mark:
    stage: str
    subject: str
    value: int
    wall_ns: int
    pid: int


def _read(path: Path) -> list[_Mark]:
    marks = []
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) == 5:
            marks.append(_Mark(parts[0], parts[1], int(parts[2]), int(parts[3]), int(parts[4])))
    return marks


def _find(
    marks: list[_Mark],
    after_ns: int,
    stage: str,
    *,
    subject: str | None = None,
    value: int | None = None,
    beyond: int | None = None,
) -> int | None:
    """When the first mark of ``stage`` at or after ``after_ns`` (``marks`` sorted by time)
    about ``subject``, at ``value`` or beyond ``beyond`` (an empty upper, -1, is beyond all)
    was made."""
    start = bisect.bisect_left(marks, after_ns, key=lambda m: m.wall_ns)
    for m in marks[start:]:
        if m.stage != stage or (subject is not None and m.subject != subject):
            continue
        if value is not None and m.value != value:
            continue
        if beyond is not None and not (m.value > beyond or m.value == -1):
            continue
        return m.wall_ns
    return None


def _last(found: list[int | None]) -> int | None:
    times = [f for f in found if f is not None]
    return max(times) if times else None


def _stamps(
    marks: list[_Mark],
    s: StepTimes,
    tables: set[str],
    views: set[str],
    watched: set[str],
    dataflows: list[str],
) -> list[tuple[str, int | None]]:
    """One step's stages and when each happened (None: no mark found)."""
    ts, t0 = s.ts, s.started_ns
    stamps: list[tuple[str, int | None]] = [("writes start", t0)]
    stamps.append(("group commit chooses ts", _find(marks, t0, "commit_start", value=ts)))
    # The group's tables are the shards appended to exactly ``ts + 1``.
    for stage in ("append_start", "blob_written", "cas_done"):
        found = [_find(marks, t0, stage, subject=t, value=ts + 1) for t in tables]
        stamps.append((f"tables: {stage.replace('_', ' ')}", _last(found)))
    stamps.append(("acknowledged", _find(marks, t0, "acknowledged", value=ts)))
    stamps.append(("write call returns", s.returned_ns))
    found = [_find(marks, t0, "upper_polled", subject=t, beyond=ts) for t in tables & watched]
    stamps.append(("replica learns the tables' uppers", _last(found)))
    for name in dataflows:
        for stage in ("step_start", "step_end"):
            when = _find(marks, t0, stage, subject=name, beyond=ts)
            stamps.append((f"{name}: {stage.replace('_', ' ')}", when))
    stamps.append(("replica sends the batch", _find(marks, t0, "subscribe_sent", beyond=ts)))
    stamps.append(("controller receives it", _find(marks, t0, "subscribe_received", beyond=ts)))
    stamps.append(("subscribe delivers", s.delivered_ns))
    if dataflows:
        view_end = _find(marks, t0, "step_end", subject=dataflows[0], beyond=ts)
        stamps.append((OFF_PATH, view_end))
    for stage in ("append_start", "cas_done"):
        found = [_find(marks, t0, stage, subject=v, beyond=ts) for v in views]
        stamps.append((f"  view shards: {stage.replace('_', ' ')} (last)", _last(found)))
    return stamps


OFF_PATH: Final = "off the path, from the view's step end:"
"""Not a stage: the stages after it count their gap from the view's step end."""


def breakdown(path: Path, steps: list[StepTimes]) -> list[tuple[str, float, float]]:
    """``(stage, p50 ms after the writes started, p50 ms after the stage before)`` per stage."""
    marks = sorted(_read(path), key=lambda m: m.wall_ns)
    me = os.getpid()
    tables = {m.subject for m in marks if m.stage == "cas_done" and m.pid == me}
    views = {m.subject for m in marks if m.stage == "cas_done" and m.pid != me}
    watched = {m.subject for m in marks if m.stage == "upper_polled"}
    dataflows: list[str] = []
    for m in marks:
        if m.stage == "step_start" and m.subject not in dataflows:
            dataflows.append(m.subject)
    at: dict[str, list[float]] = defaultdict(list)
    gaps: dict[str, list[float]] = defaultdict(list)
    order: list[str] = []
    for s in steps:
        prev = s.started_ns
        for name, wall in _stamps(marks, s, tables, views, watched, dataflows):
            if name not in order:
                order.append(name)
            if wall is None:
                continue
            if name == OFF_PATH:  # a base for the stages after it, not a stage
                prev = wall
                continue
            at[name].append((wall - s.started_ns) / 1e6)
            gaps[name].append((wall - prev) / 1e6)
            prev = wall
    return [
        (
            name,
            statistics.median(at[name]) if at[name] else float("nan"),
            statistics.median(gaps[name]) if gaps[name] else float("nan"),
        )
        for name in order
    ]


def format_table(rows: list[tuple[str, float, float]]) -> str:
    width = max(len(r[0]) for r in rows)
    lines = [f"{'stage':<{width}}  {'at p50 ms':>9}  {'+ p50 ms':>8}"]
    for name, at, gap in rows:
        if name == OFF_PATH:
            lines.append(name)
            continue
        lines.append(f"{name:<{width}}  {at:>9.1f}  {gap:>8.1f}")
    return "\n".join(lines)
