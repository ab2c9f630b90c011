"""Random command and event sequences against the replica state machine.

A model controller keeps its own obligations (compaction never regresses and never passes what
an importer still needs; indexes are not dropped while imported; answered peeks are followed by
``CancelPeek`` in its history) and reconnects now and then with its reduced history. Whatever
happens, on every connection the replica's responses must keep their obligations
(:class:`~spate.testing.replica_checks.ResponseChecker`), and no peek may wait once it could
be answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from spate.compute.replica.actions import (
    AbortPeek,
    Action,
    BuildDataflow,
    DataflowFailed,
    DataflowReady,
    DropDataflow,
    PeekFinished,
    RunPeek,
    Send,
    Stepped,
)
from spate.compute.replica.state import ReplicaState
from spate.frontier import Antichain
from spate.ids import GlobalId, PeekId
from spate.protocol.compute import (
    AllowCompaction,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    InitializationComplete,
    InstanceConfig,
    Peek,
    PeekResponse,
    Schedule,
)
from spate.protocol.history import ComputeCommandHistory
from spate.testing.replica_checks import ResponseChecker

from .helpers import D, hello, importing_dataflow, index_dataflow, peek, sink_dataflow, updates


@dataclass
class Model:
    state: ReplicaState = field(default_factory=lambda: ReplicaState(name="prop"))
    history: ComputeCommandHistory = field(default_factory=ComputeCommandHistory)
    epoch: int = 0
    checker: ResponseChecker = field(default_factory=ResponseChecker)
    # controller view: export -> (kind, as_of, compaction)
    live: dict[GlobalId, tuple[str, int, int]] = field(default_factory=dict)
    imports: dict[GlobalId, GlobalId] = field(default_factory=dict)  # importer -> index
    # replica-side bookkeeping of the driver
    building: dict[int, int] = field(default_factory=dict)  # key -> as_of
    uppers: dict[int, int] = field(default_factory=dict)  # ready key -> upper
    running: dict[PeekId, RunPeek] = field(default_factory=dict)
    peeks: dict[PeekId, Peek] = field(default_factory=dict)  # sent this epoch
    used: set[GlobalId] = field(default_factory=set)  # export ids of this epoch (never reused)
    next_peek: int = 1

    def perform(self, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, Send):
                assert a.epoch == self.epoch, f"response for epoch {a.epoch} on {self.epoch}"
                self.checker.received(a.response)
                if isinstance(a.response, PeekResponse):
                    self.cancel_in_history(a.response.uuid)
            elif isinstance(a, BuildDataflow):
                assert a.description.as_of is not None
                self.building[a.key] = a.description.as_of.elements[0]
            elif isinstance(a, DropDataflow):
                self.building.pop(a.key, None)
                self.uppers.pop(a.key, None)
            elif isinstance(a, RunPeek):
                assert a.epoch == self.epoch
                self.running[a.peek.uuid] = a
            elif isinstance(a, AbortPeek):
                self.running.pop(a.uuid, None)

    def cancel_in_history(self, uuid: PeekId) -> None:
        self.history.push(CancelPeek(uuid))

    def send(self, command: ComputeCommand) -> None:
        self.checker.sent(command)
        self.history.push(command)
        self.perform(self.state.command(self.epoch, command))

    def connect(self) -> None:
        self.epoch += 1
        self.checker = ResponseChecker()
        self.running.clear()
        self.peeks.clear()
        self.used = set(self.live)
        self.perform(self.state.connect(self.epoch))
        self.history.reduce()
        replay = list(self.history.commands())
        self.checker.sent(hello(self.epoch))
        self.perform(self.state.command(self.epoch, hello(self.epoch)))
        if not replay:
            replay = [CreateInstance(InstanceConfig()), InitializationComplete()]
        for c in replay:
            if isinstance(c, Peek):
                self.peeks[c.uuid] = c
            self.checker.sent(c)
            self.perform(self.state.command(self.epoch, c))
        if not self.history.commands():
            self.history.push(CreateInstance(InstanceConfig()))
            self.history.push(InitializationComplete())

    def event(self, event: object) -> None:
        self.perform(self.state.handle(event))  # type: ignore[arg-type]

    # -- operations -------------------------------------------------------------------------

    def create(self, kind: int, slot: int, as_of: int) -> None:
        if kind == 0:
            id = GlobalId.user(100 + slot)
            if id in self.live:
                return
            df = index_dataflow(id, as_of)
            self.live[id] = ("index", as_of, as_of)
        elif kind == 1:
            id = GlobalId.user(200 + slot)
            source = GlobalId.user(100 + slot)
            if id in self.live or self.live.get(source, ("",))[0] != "index":
                return
            as_of = max(as_of, self.live[source][2])
            df = importing_dataflow(id, source, as_of)
            self.live[id] = ("index", as_of, as_of)
            self.imports[id] = source
        else:
            id = GlobalId.transient(300 + slot)
            if id in self.live:
                return
            df = sink_dataflow(id, as_of, subscribe=True)
            self.live[id] = ("subscribe", as_of, as_of)
        if id in self.used:  # export ids are unique within a protocol iteration
            del self.live[id]
            return
        self.used.add(id)
        self.send(CreateDataflow(df))
        self.send(Schedule(id))

    def ready(self, pick: int) -> None:
        if self.building:
            key = sorted(self.building)[pick % len(self.building)]
            as_of = self.building.pop(key)
            self.uppers[key] = as_of
            self.event(DataflowReady(key, Antichain.of(as_of)))

    def step(self, pick: int, by: int, fail: bool) -> None:
        if not self.uppers:
            return
        key = sorted(self.uppers)[pick % len(self.uppers)]
        if fail:
            self.uppers.pop(key)
            self.event(DataflowFailed(key, "boom"))
            return
        lower = self.uppers[key]
        upper = lower + by
        self.uppers[key] = upper
        subs = {}
        for id, (kind, _, _) in self.live.items():
            if kind == "subscribe" and self.state.dataflow_of(id) == key:
                subs[id] = updates([((1, "x"), t, 1) for t in range(lower, upper)])
        self.event(Stepped(key, Antichain.of(upper), subs))

    def compact(self, slot: int, by: int, drop: bool) -> None:
        ids = sorted(self.live)
        if not ids:
            return
        id = ids[slot % len(ids)]
        kind, as_of, since = self.live[id]
        importers = [i for i, src in self.imports.items() if src == id and i in self.live]
        if drop and not importers:
            del self.live[id]
            self.imports.pop(id, None)
            self.send(AllowCompaction(id, Antichain.empty()))
            return
        limit = min((self.live[i][1] for i in importers), default=None)
        new = since + by if limit is None else min(since + by, limit)
        if new > since:
            self.live[id] = (kind, as_of, new)
            self.send(AllowCompaction(id, Antichain.of(new)))

    def peek(self, slot: int, ts: int) -> None:
        ids = [i for i, v in self.live.items() if v[0] == "index"] + [GlobalId.user(999)]
        id = ids[slot % len(ids)]
        p = peek(id, ts, self.next_peek)
        self.next_peek += 1
        self.peeks[p.uuid] = p
        self.send(p)

    def cancel(self, pick: int) -> None:
        if self.peeks:
            uuid = sorted(self.peeks, key=str)[pick % len(self.peeks)]
            self.send(CancelPeek(uuid))

    def finish(self, pick: int, error: bool) -> None:
        if self.running:
            uuid = sorted(self.running, key=str)[pick % len(self.running)]
            run = self.running.pop(uuid)
            rows = None if error else updates([((1, "x"), 0, 1)]).drop_columns(["_time"])
            self.event(PeekFinished(run.epoch, uuid, rows=rows, error="e" if error else None))

    # -- invariants -------------------------------------------------------------------------

    def check(self) -> None:
        assert self.checker.violations == [], self.checker.violations
        answered = self.checker.observed.peeks
        for uuid in self.state.pending_peeks():
            p = self.peeks.get(uuid)
            if p is None or uuid in self.running or uuid in answered:
                continue
            key = self.state.dataflow_of(p.target.id)
            upper = self.uppers.get(key) if key is not None else None
            assert upper is None or upper <= p.timestamp, (
                f"peek {uuid} at {p.timestamp} waits although the upper is {upper}"
            )


OPS = st.lists(
    st.tuples(st.integers(0, 11), st.integers(0, 7), st.integers(0, 6), st.booleans()),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_random_sequences_keep_the_protocol_obligations(ops) -> None:
    m = Model()
    m.connect()
    for op, a, b, flag in ops:
        if op == 0:
            m.create(a % 3, a // 3, b)
        elif op == 1:
            m.ready(a)
        elif op in (2, 3):
            m.step(a, b, fail=flag and b == 0 and a == 0)
        elif op in (4, 5):
            m.compact(a, b, drop=flag and b < 2)
        elif op in (6, 7):
            m.peek(a, b * 2)
        elif op == 8:
            m.cancel(a)
        elif op == 9:
            m.finish(a, error=flag)
        elif op == 10 or (op == 11 and flag):
            m.connect()
        m.check()
    # Drain: build everything, answer every running peek; checks still hold.
    while m.building:
        m.ready(0)
    for key in sorted(m.uppers):
        m.step(key, 3, fail=False)
    while m.running:
        m.finish(0, error=False)
    m.check()
    answered = m.checker.observed.peeks
    for uuid in m.peeks:
        assert uuid not in m.running
    assert all(isinstance(r, PeekResponse) for r in answered.values())


def test_model_sanity_one_index() -> None:
    m = Model()
    m.connect()
    m.create(0, 0, 0)
    m.ready(0)
    m.step(0, 5, fail=False)
    m.peek(0, 3)
    m.finish(0, error=False)
    m.check()
    assert len(m.checker.observed.peeks) == 1
    assert D.arity == 2
