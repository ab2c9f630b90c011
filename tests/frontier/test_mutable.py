"""ChangeBatch and MutableAntichain against a brute-force model."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.errors import FrontierRegression, NegativeCount
from spate.frontier import Antichain, ChangeBatch, MutableAntichain, Product
from spate.testing.strategies import products, times


@given(st.lists(st.tuples(times(), st.integers(-3, 3))))
def test_change_batch_is_consolidated(changes: list[tuple[int, int]]) -> None:
    batch = ChangeBatch(changes)
    model: Counter[int] = Counter()
    for t, d in changes:
        model[t] += d
    assert dict(batch.items()) == {t: d for t, d in model.items() if d != 0}
    assert all(d != 0 for _, d in batch.items())
    assert [t for t, _ in batch.items()] == sorted(t for t, _ in batch.items())


def _apply_valid(ma, model: Counter, time, delta) -> bool:
    """Apply one change if the model says it is allowed; return whether it was."""
    frontier = ma.frontier()
    if delta < 0 and model[time] + delta < 0:
        with pytest.raises(NegativeCount):
            ma.update_iter([(time, delta)])
        return False
    if delta > 0 and not frontier.is_empty() and not frontier.less_equal(time):
        with pytest.raises(FrontierRegression):
            ma.update_iter([(time, delta)])
        return False
    old = ma.frontier()
    changes = ma.update_iter([(time, delta)])
    model[time] += delta
    # The reported change applied to the old frontier gives the new one.
    counts = Counter({t: 1 for t in old.elements})
    for t, d in changes.items():
        counts[t] += d
    assert Antichain(t for t, c in counts.items() if c > 0) == ma.frontier()
    assert all(c in (0, 1) for c in counts.values())
    return True


@pytest.mark.parametrize("kind", ["int", "product"])
@given(data=st.data())
def test_mutable_antichain_matches_brute_force(kind: str, data: st.DataObject) -> None:
    time_strategy = times() if kind == "int" else products()
    ma: MutableAntichain = MutableAntichain()
    model: Counter = Counter()
    closed = False
    for _ in range(data.draw(st.integers(0, 30))):
        t = data.draw(time_strategy)
        d = data.draw(st.integers(-2, 3).filter(lambda x: x != 0))
        if closed and d > 0:
            with pytest.raises(FrontierRegression):
                ma.update_iter([(t, d)])
            continue
        was_nonempty = not ma.frontier().is_empty()
        _apply_valid(ma, model, t, d)
        positive = [x for x, c in model.items() if c > 0]
        assert ma.frontier() == Antichain(positive)
        if was_nonempty and ma.frontier().is_empty():
            closed = True
        for x, c in model.items():
            assert ma.count_for(x) == c


def test_failed_update_changes_nothing() -> None:
    ma: MutableAntichain[int] = MutableAntichain([(5, 1), (7, 2)])
    with pytest.raises(NegativeCount, match="count at 7 would become -1"):
        ma.update_iter([(5, -1), (7, -3)])
    assert ma.counts() == [(5, 1), (7, 2)]
    with pytest.raises(FrontierRegression, match=r"not beyond the frontier \{5\}"):
        ma.update_iter([(3, 1), (5, -1)])
    assert ma.counts() == [(5, 1), (7, 2)]
    assert ma.frontier() == Antichain.of(5)


def test_frontier_changes_are_reported() -> None:
    ma: MutableAntichain[int] = MutableAntichain()
    assert ma.update_iter([(5, 1)]).items() == [(5, 1)]
    assert ma.update_iter([(7, 1)]).is_empty()
    assert ma.update_iter([(5, -1)]).items() == [(5, -1), (7, 1)]
    assert ma.update_iter([(7, -1)]).items() == [(7, -1)]
    assert ma.frontier() == Antichain.empty()
    with pytest.raises(FrontierRegression):
        ma.update_iter([(9, 1)])


def test_product_frontier() -> None:
    ma: MutableAntichain[Product] = MutableAntichain([(Product(1, 3), 1), (Product(3, 1), 1)])
    assert ma.frontier() == Antichain([Product(1, 3), Product(3, 1)])
    # (2, 2) is beyond neither element: adding it would move the frontier back.
    with pytest.raises(FrontierRegression):
        ma.update_iter([(Product(2, 2), 1)])
    assert ma.update_iter([(Product(2, 3), 1)]).is_empty()
    moved = ma.update_iter([(Product(1, 3), -1)])
    assert moved.items() == [(Product(1, 3), -1), (Product(2, 3), 1)]
    assert ma.frontier() == Antichain([Product(2, 3), Product(3, 1)])
