"""Read timestamps: strict serializable reads follow the clock, serializable ones do not wait."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

import pytest

from spate.environment.api import Environment
from spate.environment.reads import ReadInput, _pick_timestamp
from spate.errors import ReadBeforeSince, UsageError
from spate.frontier.antichain import Antichain
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource
from spate.repr import INT64, RelationDesc

NUMS = RelationDesc.of(("n", INT64, False))


@dataclass
class _Oracle:
    read: int

    def read_ts(self) -> int:
        return self.read


@dataclass
class _Runtime:
    oracle: _Oracle


def _rt(read_ts: int) -> Any:
    return cast(Any, _Runtime(_Oracle(read_ts)))


def _input(name: str, since: int | None, upper: int | None) -> ReadInput:
    def f(t: int | None) -> Antichain:
        return Antichain.empty() if t is None else Antichain.of(t)

    return ReadInput(name, f(since), f(upper))


def test_strict_reads_take_the_oracle_and_serializable_reads_the_latest_complete_time() -> None:
    inputs = [_input("a", 10, 50), _input("b", 20, 40)]
    assert _pick_timestamp(_rt(100), inputs, None) == 100
    assert _pick_timestamp(_rt(5), inputs, None) == 20  # never before a since
    assert _pick_timestamp(_rt(100), inputs, None, "serializable") == 39  # b completed 39
    # An input with nothing written yet: its since (the read waits for it).
    assert _pick_timestamp(_rt(100), [_input("a", 30, 0)], None, "serializable") == 30
    # A closed input (upper {}) does not bound the time; with no other, the oracle's.
    assert _pick_timestamp(_rt(77), [_input("a", 10, None)], None, "serializable") == 77
    assert _pick_timestamp(_rt(77), inputs, 25, "serializable") == 25  # as_of wins


def test_a_read_before_a_since_names_the_collection_and_both_times() -> None:
    with pytest.raises(ReadBeforeSince, match=r"read of b at 15 is before its since \{20\}"):
        _pick_timestamp(_rt(100), [_input("a", 10, 50), _input("b", 20, 40)], 15)
    with pytest.raises(ReadBeforeSince, match=r"gone can no longer be read"):
        _pick_timestamp(_rt(100), [_input("gone", None, None)], None)


def test_the_read_timestamp_follows_the_clock_with_no_tables(env: Environment) -> None:
    start = int(time.time() * 1000)
    assert env.status().read_ts >= start - 1_000  # opened: advanced to the clock
    deadline = time.monotonic() + 10
    while env.status().read_ts < start + 1_000:  # the tick moves it about once a second
        assert time.monotonic() < deadline, f"read ts stuck at {env.status().read_ts}"
        time.sleep(0.2)


def test_both_isolation_levels_see_an_acknowledged_table_write(env: Environment) -> None:
    env.create_table("nums", NUMS)
    env.insert("nums", [(1,), (2,)])
    for isolation in ("strict serializable", "serializable"):
        got = Counter(r["n"] for r in env.select("nums", isolation=isolation).to_pylist())
        assert got == Counter([1, 2]), isolation


def test_an_unknown_isolation_level_is_refused_by_name(env: Environment) -> None:
    env.create_table("nums", NUMS)
    with pytest.raises(UsageError, match="isolation 'snapshot' is not one of strict serializable"):
        env.select("nums", isolation="snapshot")


def test_a_strict_read_of_a_source_observes_what_was_ingested_before_its_timestamp(
    env: Environment,
) -> None:
    env.create_source(
        "auction",
        LoadGeneratorSource(LoadGenerator.AUCTION, tick_interval_ms=100, rows_per_tick=20),
    )
    env.set_retain_history("auction_bids", 600_000)  # the since stays at the start
    deadline = time.monotonic() + 60
    while (upper := env.status().collection("auction_bids").upper.as_option() or 0) <= 0 or (
        env.select("auction_bids", as_of=upper - 1).num_rows == 0
    ):
        assert time.monotonic() < deadline, "the source ingested nothing in 60 s"
        time.sleep(0.3)
    ingested = env.select("auction_bids", as_of=upper - 1).num_rows
    since = env.status().collection("auction_bids").since.as_option()
    assert since is not None and since < upper - 1, "retained history should keep the since back"
    # The read timestamp follows the clock (the tick, about once a second): once it has passed
    # the ingested data, a strict read sees all of it, not the since (the oldest readable time).
    # (Source data newer than the read timestamp is not promised to a strict read: only
    # acknowledged writes are.)
    while env.status().read_ts < upper - 1:
        assert time.monotonic() < deadline, f"the read timestamp never reached {upper - 1}"
        time.sleep(0.2)
    assert env.select("auction_bids").num_rows >= ingested > 0
    assert env.select("auction_bids", isolation="serializable").num_rows >= ingested
