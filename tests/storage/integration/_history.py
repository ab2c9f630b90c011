"""Reading the whole history of shards, and checking a collection against upstream states."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from spate.persist.client import PersistClient
from spate.persist.read import ListenUpdates
from spate.repr.arrow import table_to_updates
from spate.repr.types import Row


def all_updates(client: PersistClient, shard: Any, desc: Any) -> list[tuple[Row, int, int]]:
    """Every update of a shard (readable from time 0), in time order."""
    reader = client.open_leased_reader(shard, desc)
    try:
        upper = client.fetch_state(shard).upper
        out = table_to_updates(reader.snapshot(0))
        listener = reader.listener(0)
        while listener.frontier.less_than(upper):
            for e in listener.poll(timeout=10):
                if isinstance(e, ListenUpdates):
                    out.extend(table_to_updates(e.updates))
        return sorted(out, key=lambda u: u[1])
    finally:
        reader.expire()


def states_at(updates: Sequence[tuple[Row, int, int]], times: Sequence[int]) -> list[Counter[Row]]:
    """The contents at each of ``times`` (ascending)."""
    out = []
    acc: Counter[Row] = Counter()
    i = 0
    for t in times:
        while i < len(updates) and updates[i][1] <= t:
            acc[updates[i][0]] += updates[i][2]
            i += 1
        out.append(+acc)
    return out


def binding_times(client: PersistClient, shard: Any, desc: Any) -> list[int]:
    """The times at which a remap collection bound a new resume point."""
    return sorted({t for _r, t, _d in all_updates(client, shard, desc)})


def key(state: Counter[Row]) -> tuple[tuple[Row, int], ...]:
    return tuple(sorted(state.items(), key=repr))


def check_prefix_states(
    observed: Sequence[Counter[Row]], upstream: Sequence[Counter[Row]]
) -> list[int]:
    """Each observed state equals an upstream state, in order; returns their indices."""
    index: dict[tuple[tuple[Row, int], ...], list[int]] = {}
    for i, s in enumerate(upstream):
        index.setdefault(key(s), []).append(i)
    at = 0
    found = []
    for n, s in enumerate(observed):
        assert all(c == 1 for c in s.values()), f"state {n}: a row with multiplicity != 1"
        candidates = [i for i in index.get(key(s), []) if i >= at]
        assert candidates, f"observed state {n} is not an upstream state at or after #{at}"
        at = candidates[0]
        found.append(at)
    return found
