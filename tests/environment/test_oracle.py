"""The timestamp oracle: monotonic across restarts and clock jumps, few consensus writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.clock import ManualClock
from spate.environment.oracle import TimestampOracle
from spate.errors import UsageError
from spate.persist.location import Consensus, open_consensus


class JumpyClock(ManualClock):
    """A wall clock that an NTP correction can move backwards."""

    def jump_to(self, now_millis: int) -> None:
        self._now = now_millis


class CountingConsensus:
    def __init__(self, inner: Consensus) -> None:
        self.inner = inner
        self.cas = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        self.cas += 1
        return self.inner.compare_and_set(key, expected, data)


@pytest.fixture
def consensus(tmp_path: Path) -> Consensus:
    return open_consensus(f"sqlite:///{tmp_path}/consensus.db")


def test_write_timestamps_increase_and_follow_the_clock(consensus: Consensus) -> None:
    clock = JumpyClock(1_000)
    oracle = TimestampOracle(consensus, clock)
    a = oracle.write_ts()
    b = oracle.write_ts()
    assert a == 1_000 and b == 1_001
    clock.jump_to(5_000)
    assert oracle.write_ts() == 5_000
    clock.jump_to(2_000)  # the wall clock went back: timestamps do not
    assert oracle.write_ts() == 5_001


def test_reads_see_every_applied_write_and_never_go_back(consensus: Consensus) -> None:
    clock = JumpyClock(100)
    oracle = TimestampOracle(consensus, clock)
    assert oracle.read_ts() == 0
    w1, w2 = oracle.write_ts(), oracle.write_ts()
    oracle.apply_write(w2)
    assert oracle.read_ts() == w2
    oracle.apply_write(w1)  # acknowledging an older write does not move reads back
    assert oracle.read_ts() == w2
    assert oracle.write_ts() > oracle.read_ts()
    with pytest.raises(UsageError, match=r"apply_write\(99999\): no write timestamp"):
        oracle.apply_write(99_999)


def test_a_restarted_oracle_starts_beyond_everything_handed_out(consensus: Consensus) -> None:
    clock = JumpyClock(10_000)
    first = TimestampOracle(consensus, clock, window_ms=500)
    handed = [first.write_ts() for _ in range(1_200)]  # crosses the ceiling twice
    first.apply_write(handed[-1])
    clock.jump_to(0)  # and the machine rebooted with a broken clock
    second = TimestampOracle(consensus, clock, window_ms=500)
    assert second.read_ts() >= handed[-1]
    assert second.write_ts() > max(handed)


def test_consensus_is_written_once_per_window_not_per_timestamp(consensus: Consensus) -> None:
    counting = CountingConsensus(consensus)
    clock = JumpyClock(0)
    oracle = TimestampOracle(counting, clock, window_ms=1_000)  # type: ignore[arg-type]
    start = counting.cas
    for _ in range(5_000):
        oracle.write_ts()
    # 5,000 timestamps over 5,000 ms of logical time: about one ceiling per 1,000.
    assert counting.cas - start <= 6


def test_two_oracles_on_one_consensus_never_lower_the_ceiling(consensus: Consensus) -> None:
    a = TimestampOracle(consensus, JumpyClock(1_000), window_ms=100)
    b = TimestampOracle(consensus, JumpyClock(50_000), window_ms=100)
    b.write_ts()
    a.write_ts()
    for _ in range(300):
        a.write_ts()
    c = TimestampOracle(consensus, JumpyClock(0), window_ms=100)
    assert c.write_ts() > 50_000


def test_reserving_ahead_keeps_write_ts_off_consensus(consensus: Consensus) -> None:
    """Once less than half a window is left, ``reserve_ahead`` raises the ceiling (one CaS),
    and ``write_ts`` up to the old ceiling and beyond it then writes nothing; a restart starts
    beyond every timestamp handed out."""
    clock = JumpyClock(1_000)
    counting = CountingConsensus(consensus)
    oracle = TimestampOracle(counting, clock, window_ms=100)  # type: ignore[arg-type]
    assert oracle.ceiling == 1_100 and counting.cas == 1
    clock.jump_to(1_020)
    assert not oracle.needs_reserve()
    oracle.reserve_ahead()  # more than half a window left: nothing to do
    assert counting.cas == 1
    clock.jump_to(1_060)
    assert oracle.needs_reserve()
    oracle.reserve_ahead()
    assert counting.cas == 2 and oracle.ceiling == 1_060 + 50 + 100
    assert not oracle.needs_reserve()
    stamps = []
    for now in (1_060, 1_099, 1_100, 1_150):
        clock.jump_to(now)
        stamps.append(oracle.write_ts())
    assert stamps == [1_060, 1_099, 1_100, 1_150] and counting.cas == 2
    assert TimestampOracle(consensus, clock, window_ms=100).write_ts() > stamps[-1]
