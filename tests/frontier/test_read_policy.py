"""Read policies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.errors import InvalidReadPolicy
from spate.frontier import Antichain, ReadPolicy, frontier
from spate.frontier.read_policy import LagWritesBy

uppers = st.one_of(st.none(), st.integers(0, 10_000)).map(frontier)


@st.composite
def policies(draw: st.DrawFn, depth: int = 2) -> ReadPolicy:
    options = [
        st.builds(LagWritesBy, st.integers(0, 500), st.integers(1, 200)),
        st.just(ReadPolicy.step_back()),
    ]
    if depth > 0:
        options.append(
            st.lists(policies(depth - 1), min_size=1, max_size=3).map(ReadPolicy.multiple)
        )
    return draw(st.one_of(options))


@given(policies(), st.integers(0, 10_000), st.integers(0, 10_000))
def test_lagging_policies_are_monotone_in_the_write_frontier(
    policy: ReadPolicy, u1: int, u2: int
) -> None:
    lo, hi = sorted((u1, u2))
    assert policy.frontier(Antichain.of(lo)).less_equal(policy.frontier(Antichain.of(hi)))


@given(st.integers(0, 10_000), st.integers(0, 1_000), st.integers(1, 1_000))
def test_lag_writes_by_rounding(upper: int, lag: int, max_granularity: int) -> None:
    got = ReadPolicy.lag_writes_by(lag, max_granularity).frontier(Antichain.of(upper)).as_option()
    assert got is not None
    base = max(upper - lag, 0)
    if lag == 0:
        assert got == upper
        return
    granularity = min(lag, max_granularity)
    assert got % granularity == 0
    assert got <= base < got + granularity
    assert got <= upper


def test_lag_writes_by_examples() -> None:
    p = ReadPolicy.lag_writes_by(10, 1)
    assert p.frontier(Antichain.of(100)) == Antichain.of(90)
    assert p.frontier(Antichain.of(5)) == Antichain.of(0)
    assert ReadPolicy.lag_writes_by(1000, 300).frontier(Antichain.of(2750)) == Antichain.of(1500)
    assert ReadPolicy.lag_writes_by(0, 5).frontier(Antichain.of(17)) == Antichain.of(17)
    # An empty upper asks for the minimum, which never advances a capability.
    assert p.frontier(Antichain.empty()) == Antichain.minimum()


def test_step_back() -> None:
    p = ReadPolicy.step_back()
    assert p.frontier(Antichain.of(10)) == Antichain.of(9)
    assert p.frontier(Antichain.of(0)) == Antichain.of(0)
    assert p.frontier(Antichain.empty()) == Antichain.minimum()


@given(st.lists(policies(1), min_size=1, max_size=4), uppers)
def test_multiple_is_the_meet_of_its_members(members: list[ReadPolicy], upper) -> None:
    expected = Antichain.empty()
    for p in members:
        expected = expected.meet(p.frontier(upper))
    assert ReadPolicy.multiple(members).frontier(upper) == expected


def test_fixed_policies() -> None:
    assert ReadPolicy.valid_from(Antichain.of(7)).frontier(Antichain.of(100)) == Antichain.of(7)
    assert ReadPolicy.valid_from(Antichain.empty()).frontier(Antichain.of(1)) == Antichain.empty()
    assert ReadPolicy.no_policy(Antichain.of(3)).frontier(Antichain.empty()) == Antichain.of(3)


@pytest.mark.parametrize(
    ("lag", "gran", "message"),
    [
        (-1, 1, "lag must be an int >= 0, got -1"),
        (10, 0, "max_granularity must be an int >= 1, got 0"),
        (1.5, 1, "lag must be an int >= 0, got 1.5"),
    ],
)
def test_bad_policies_are_refused(lag: object, gran: object, message: str) -> None:
    with pytest.raises(InvalidReadPolicy, match=message):
        ReadPolicy.lag_writes_by(lag, gran)  # type: ignore[arg-type]
    with pytest.raises(InvalidReadPolicy, match="at least one"):
        ReadPolicy.multiple([])
