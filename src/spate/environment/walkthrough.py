"""``spate walkthrough``: frontiers, read policies and read holds on a worked example.

A collection whose write frontier advances, a read policy that trails it, and read holds (a peek,
a dependent index) that keep its since back. Each step prints the upper, every hold and the since
that results, and checks that the since equals the minimum over all holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from spate.frontier import Antichain, ChangeBatch, Frontier, MutableAntichain, ReadHold, ReadPolicy
from spate.ids import GlobalId


@dataclass
class _Step:
    action: str
    upper: Frontier
    holds: str
    since: Frontier


class _Collection:
    """A one-collection issuer of read holds, the way the controllers keep them."""

    def __init__(self, id: GlobalId, policy: ReadPolicy) -> None:
        self.id = id
        self.policy = policy
        self.upper: Frontier = Antichain.minimum()
        self.read_capabilities: MutableAntichain[int] = MutableAntichain()
        self.implied = self._issue(policy.frontier(self.upper))
        self.compactions: list[Frontier] = []

    def _issue(self, since: Frontier) -> ReadHold:
        self.read_capabilities.update_iter((t, 1) for t in since)
        return ReadHold(self.id, since, self._changes)

    def _changes(self, id: GlobalId, changes: ChangeBatch[int]) -> None:
        moved = self.read_capabilities.update_iter(changes.items())
        if not moved.is_empty():
            self.compactions.append(self.since)

    @property
    def since(self) -> Frontier:
        return self.read_capabilities.frontier()

    def acquire_read_hold(self) -> ReadHold:
        return self._issue(self.since)

    def advance_upper(self, upper: Frontier) -> None:
        self.upper = upper
        wanted = self.policy.frontier(upper)
        if self.implied.since.less_equal(wanted):
            self.implied.try_downgrade(wanted)


def run_demo(console: Console | None = None) -> list[_Step]:
    """Run the worked example; return its steps (tests check them)."""
    console = console or Console()
    coll = _Collection(GlobalId.user(1), ReadPolicy.lag_writes_by(10, 5))
    holds: dict[str, ReadHold] = {}
    steps: list[_Step] = []

    def record(action: str) -> None:
        live = {name: h.since for name, h in holds.items() if not h.is_released()}
        everything = [coll.implied.since, *live.values()]
        expected: Frontier = Antichain.empty()
        for f in everything:
            expected = expected.meet(f)
        assert coll.since == expected, (coll.since, expected)
        shown = ", ".join(f"{n}@{f}" for n, f in live.items()) or "-"
        steps.append(
            _Step(action, coll.upper, f"implied@{coll.implied.since}; {shown}", coll.since)
        )

    record("create u1 with lag_writes_by(10 ms, granularity 5 ms)")
    coll.advance_upper(Antichain.of(37))
    record("writes seal times < 37")
    holds["peek"] = coll.acquire_read_hold()
    holds["peek"].try_downgrade(Antichain.of(30))
    record("a peek at 30 takes a read hold")
    holds["index"] = coll.acquire_read_hold()
    record("an index on u1 holds its as_of")
    coll.advance_upper(Antichain.of(120))
    record("writes seal times < 120")
    holds["peek"].release()
    record("the peek answers and releases")
    holds["index"].try_downgrade(Antichain.of(100))
    record("the index compacts to 100")
    coll.advance_upper(Antichain.empty())
    record("u1 is closed (upper {})")
    holds["index"].release()
    coll.implied.try_downgrade(Antichain.empty())
    record("everyone lets go: the since is {}")

    table = Table(title="spate: read policies and read holds decide the since")
    for col in ("step", "upper", "holds", "since"):
        table.add_column(col)
    for i, s in enumerate(steps):
        table.add_row(f"{i}. {s.action}", str(s.upper), s.holds, str(s.since))
    console.print(table)
    console.print(
        "compaction allowed at: " + " → ".join(str(f) for f in coll.compactions),
    )
    console.print("since == min(read holds) held at every step.")
    return steps
