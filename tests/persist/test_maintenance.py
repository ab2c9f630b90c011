"""A writer's maintenance runs in the background, after its appends have returned."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import spate.persist.write as write_module
from spate.ids import ShardId
from spate.persist import PersistClient
from spate.repr.arrow import table_to_updates
from tests.persist.conftest import DESC, A, tok, updates


def test_appends_return_before_their_maintenance_which_runs_once_for_a_run_of_them(
    client: PersistClient, shard: ShardId, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    passes: list[int] = []
    real = write_module.run_maintenance

    def held(*args: Any, **kwargs: Any) -> Any:
        assert gate.wait(30), "the gate was never opened"
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(write_module, "run_maintenance", held)
    w = client.open_writer(shard, DESC)
    for t in range(12):
        w.compare_and_append(
            updates([((t, "v"), t, 1)]),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )
    assert passes == []  # no append waited for compaction
    assert len(client.fetch_state(shard).batches) == 12
    gate.set()
    client.wait_for_maintenance()
    # The first pass was running (held) when the second was queued; every later append
    # joined the queued one.
    assert passes == [1, 1]
    state = client.fetch_state(shard)
    assert len(state.batches) < 12
    r = client.open_leased_reader(shard, DESC)
    assert sorted(row for row, _t, _d in table_to_updates(r.snapshot(11))) == [
        (t, "v") for t in range(12)
    ]
    w.expire()


def test_expire_waits_for_a_running_pass_and_drops_a_queued_one(
    client: PersistClient, shard: ShardId, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, gate = threading.Event(), threading.Event()
    passes: list[int] = []
    real = write_module.run_maintenance

    def held(*args: Any, **kwargs: Any) -> Any:
        started.set()
        assert gate.wait(30), "the gate was never opened"
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(write_module, "run_maintenance", held)
    w = client.open_writer(shard, DESC)
    for t in range(9):  # the eighth makes a merge due (a pass runs), the ninth queues one
        w.compare_and_append(
            updates([((t, "v"), t, 1)]),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )
    assert started.wait(30)
    expired = threading.Thread(target=w.expire)
    expired.start()
    expired.join(0.3)
    assert expired.is_alive()  # waiting for the running pass
    gate.set()
    expired.join(30)
    assert not expired.is_alive()
    client.wait_for_maintenance()
    assert passes == [1]  # the queued pass was dropped: the writer is gone
    assert w.writer_id not in client.fetch_state(shard).writers


def test_an_append_with_nothing_to_compact_and_no_gc_due_queues_no_pass(
    client: PersistClient, shard: ShardId, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes: list[int] = []
    real = write_module.run_maintenance

    def counted(*args: Any, **kwargs: Any) -> Any:
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(write_module, "run_maintenance", counted)
    w = client.open_writer(shard, DESC)

    def append(t: int) -> None:
        w.compare_and_append(
            updates([((t, "v"), t, 1)]),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )

    for t in range(7):
        append(t)
    client.wait_for_maintenance()
    assert passes == []  # seven batches: fewer than a merge takes, and GC not due yet
    assert len(client.fetch_state(shard).batches) == 7
    append(7)  # the eighth batch of the run: a merge is due
    client.wait_for_maintenance()
    assert passes == [1]
    assert len(client.fetch_state(shard).batches) < 8
    w.expire()
