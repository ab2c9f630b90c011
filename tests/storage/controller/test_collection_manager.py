"""The collection manager: append-only and differential collections, read-only mode."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter

from spate.clock import ManualClock
from spate.frontier import Antichain
from spate.ids import GlobalId, SeededIdGen, ShardId
from spate.persist.client import PersistClient
from spate.persist.location import PersistLocation
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.storage.controller.collection_manager import CollectionManager
from spate.storage.controller.introspection import INTROSPECTION_DESCS
from spate.storage.controller.types import IntrospectionKind

MAPPING = IntrospectionKind.SHARD_MAPPING
STATUS = IntrospectionKind.SOURCE_STATUS_HISTORY


def contents(client: PersistClient, shard: ShardId, kind: IntrospectionKind) -> Counter[object]:
    upper = client.fetch_state(shard).upper.as_option()
    assert upper is not None
    if upper == 0:
        return Counter()
    reader = client.open_leased_reader(shard, INTROSPECTION_DESCS[kind])
    try:
        out: Counter[object] = Counter()
        for row, _t, d in table_to_updates(reader.snapshot(upper - 1)):
            out[row] += d
        return +out
    finally:
        reader.expire()


def setup() -> tuple[ManualClock, PersistClient, SeededIdGen]:
    clock = ManualClock(1_000)
    client = PersistClient(
        PersistLocation.memory(f"cm-{uuid.uuid4().hex}"), clock=clock, ids=SeededIdGen(1)
    )
    return clock, client, SeededIdGen(2)


def test_differential_collections_are_reset_to_the_desired_contents() -> None:
    clock, client, ids = setup()
    shard = ShardId.new(ids)
    desc = INTROSPECTION_DESCS[MAPPING]
    # A previous controller left rows behind.
    old = client.open_writer(shard, desc)
    old.compare_and_append(
        updates_to_table(desc, [(("u1", "s-a"), 5, 1), (("u2", "s-b"), 5, 1)]),
        expected_upper=Antichain.of(0),
        new_upper=Antichain.of(6),
        idempotency_token=uuid.uuid4(),
    )
    m = CollectionManager(client, clock, ids, read_only=False)
    m.register(GlobalId.system(1), MAPPING, shard, desc)
    m.set_desired(MAPPING, [("u2", "s-b"), ("u3", "s-c")])
    uppers = m.tick()
    assert uppers[GlobalId.system(1)] == Antichain.of(1_001)
    assert contents(client, shard, MAPPING) == Counter({("u2", "s-b"): 1, ("u3", "s-c"): 1})
    clock.advance(10)
    m.set_desired(MAPPING, [("u3", "s-c")])
    m.tick()
    assert contents(client, shard, MAPPING) == Counter({("u3", "s-c"): 1})
    clock.advance(10)
    m.tick()  # nothing changed: only the upper moves
    assert client.fetch_state(shard).upper == Antichain.of(1_021)
    m.close()


def test_append_only_rows_are_batched_and_uppers_bumped() -> None:
    clock, client, ids = setup()
    shard = ShardId.new(ids)
    desc = INTROSPECTION_DESCS[STATUS]
    m = CollectionManager(client, clock, ids, read_only=True)
    at = dt.datetime(2024, 1, 1)
    m.append(STATUS, [(at, "u1", "starting", None, None, None)])  # before registration: kept
    m.register(GlobalId.system(2), STATUS, shard, desc)
    m.append(STATUS, [(at, "u1", "running", None, None, "r1")])
    assert m.tick() == {}  # read-only: nothing written
    assert client.fetch_state(shard).upper == Antichain.of(0)
    m.read_only = False
    m.tick()
    got = contents(client, shard, STATUS)
    assert sorted(r[2] for r in got) == ["running", "starting"]  # type: ignore[index]
    clock.advance(5)
    m.tick()
    clock.advance(5)
    m.tick()
    assert client.fetch_state(shard).upper == Antichain.of(1_011)
    assert sum(contents(client, shard, STATUS).values()) == 2  # blind writes, each once
    m.close()


def test_rows_stated_while_a_write_runs_are_written_by_the_next_one() -> None:
    """The event loop states desired rows and appends status rows while a write runs in a
    thread: the write records what it wrote, so the next one writes the rest (before, it took
    the newer desired rows as written, and status rows appended meanwhile were cleared)."""
    clock, client, ids = setup()
    mapping, status = ShardId.new(ids), ShardId.new(ids)
    m = CollectionManager(client, clock, ids, read_only=False)
    m.register(GlobalId.system(1), MAPPING, mapping, INTROSPECTION_DESCS[MAPPING])
    m.register(GlobalId.system(2), STATUS, status, INTROSPECTION_DESCS[STATUS])
    m.set_desired(MAPPING, [("u1", "s-a")])
    at = dt.datetime(2024, 1, 1)
    m.append(STATUS, [(at, "u1", "starting", None, None, None)])
    m.tick()  # opens the writers
    real = {}
    for c in m._collections.values():
        writer = c.writer
        assert writer is not None
        real[c.kind] = writer.compare_and_append

    def meanwhile(kind: IntrospectionKind):  # type: ignore[no-untyped-def]
        def caa(*args, **kwargs):  # type: ignore[no-untyped-def]
            if kind is MAPPING:
                m.set_desired(MAPPING, [("u2", "s-b")])
            else:
                m.append(STATUS, [(at, "u1", "running", None, None, None)])
            return real[kind](*args, **kwargs)

        return caa

    for c in m._collections.values():
        assert c.writer is not None
        c.writer.compare_and_append = meanwhile(c.kind)  # type: ignore[method-assign]
    clock.advance(10)
    m.set_desired(MAPPING, [("u1", "s-a"), ("u3", "s-c")])
    m.append(STATUS, [(at, "u1", "paused", None, None, None)])
    m.tick()
    assert contents(client, mapping, MAPPING) == Counter({("u1", "s-a"): 1, ("u3", "s-c"): 1})
    for c in m._collections.values():
        assert c.writer is not None
        c.writer.compare_and_append = real[c.kind]  # type: ignore[method-assign]
    clock.advance(10)
    m.tick()
    assert contents(client, mapping, MAPPING) == Counter({("u2", "s-b"): 1})
    statuses = sorted(r[2] for r in contents(client, status, STATUS))  # type: ignore[index]
    assert statuses == ["paused", "running", "starting"]
    m.close()


def test_close_waits_for_a_write_in_progress() -> None:
    import threading

    clock, client, ids = setup()
    m = CollectionManager(client, clock, ids, read_only=False)
    m.register(GlobalId.system(1), MAPPING, ShardId.new(ids), INTROSPECTION_DESCS[MAPPING])
    m.tick()
    (c,) = m._collections.values()
    assert c.writer is not None
    real, entered, release = c.writer.compare_and_append, threading.Event(), threading.Event()

    def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        entered.set()
        release.wait(10)
        return real(*args, **kwargs)

    c.writer.compare_and_append = slow  # type: ignore[method-assign]
    writing = threading.Thread(target=m.tick)
    writing.start()
    assert entered.wait(10)
    closing = threading.Thread(target=m.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # waits for the write instead of expiring its writer under it
    release.set()
    writing.join(10)
    closing.join(10)
    assert not closing.is_alive()
    assert m.tick() == {}  # closed: writes nothing more
