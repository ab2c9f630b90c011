"""Antichain algebra, over int times and product times."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.frontier import Antichain, Product, frontier
from spate.frontier.antichain import _le
from spate.testing.strategies import int_antichains, product_antichains, products, times

ANTICHAINS = st.one_of(int_antichains(), product_antichains())


def _pairs() -> st.SearchStrategy:
    return st.one_of(
        st.tuples(int_antichains(), int_antichains()),
        st.tuples(product_antichains(), product_antichains()),
    )


def _triples() -> st.SearchStrategy:
    return st.one_of(
        st.tuples(int_antichains(), int_antichains(), int_antichains()),
        st.tuples(product_antichains(), product_antichains(), product_antichains()),
    )


@given(st.lists(products(), max_size=8))
def test_elements_stay_mutually_incomparable(elements: list[Product]) -> None:
    a = Antichain(elements)
    for x, y in itertools.combinations(a.elements, 2):
        assert not _le(x, y) and not _le(y, x)
    # Every inserted element is at or beyond some kept element.
    assert all(a.less_equal(e) for e in elements)


@given(st.lists(products(), max_size=6), st.randoms())
def test_insert_is_idempotent_and_order_independent(elements: list[Product], rnd) -> None:
    a = Antichain(elements)
    shuffled = list(elements)
    rnd.shuffle(shuffled)
    assert Antichain(shuffled) == a
    assert Antichain(elements + elements) == a
    assert hash(Antichain(shuffled)) == hash(a)


@given(st.lists(times(), max_size=6))
def test_int_antichain_is_the_minimum(elements: list[int]) -> None:
    a = Antichain(elements)
    assert a.as_option() == (min(elements) if elements else None)


@given(_triples())
def test_less_equal_is_reflexive_and_transitive(abc) -> None:
    a, b, c = abc
    assert a.less_equal(a)
    if a.less_equal(b) and b.less_equal(c):
        assert a.less_equal(c)


@given(_triples())
def test_meet_and_join_are_commutative_associative_absorptive(abc) -> None:
    a, b, c = abc
    assert a.meet(b) == b.meet(a)
    assert a.join(b) == b.join(a)
    assert a.meet(b.meet(c)) == a.meet(b).meet(c)
    assert a.join(b.join(c)) == a.join(b).join(c)
    assert a.meet(a.join(b)) == a
    assert a.join(a.meet(b)) == a


@given(_pairs())
def test_meet_is_greatest_lower_bound_and_join_least_upper(ab) -> None:
    a, b = ab
    m, j = a.meet(b), a.join(b)
    assert m.less_equal(a) and m.less_equal(b)
    assert a.less_equal(j) and b.less_equal(j)


@given(ANTICHAINS)
def test_empty_is_top(a) -> None:
    top = Antichain(())
    assert a.less_equal(top)
    assert a.meet(top) == a
    assert a.join(top) == top
    if not a.is_empty():
        assert not top.less_equal(a)


@given(int_antichains(), times())
def test_less_equal_time_is_dominates(a: Antichain[int], t: int) -> None:
    assert a.less_equal(t) == any(e <= t for e in a.elements)
    assert a.less_than(t) == any(e < t for e in a.elements)


@given(int_antichains(), int_antichains())
def test_int_frontier_order_matches_option_order(a: Antichain[int], b: Antichain[int]) -> None:
    """For a total order: {} is +infinity; {x} <= {y} iff x <= y."""
    inf = float("inf")
    x = a.as_option()
    y = b.as_option()
    xv = inf if x is None else x
    yv = inf if y is None else y
    assert a.less_equal(b) == (xv <= yv)
    assert a.less_than(b) == (xv < yv)
    assert a.meet(b).as_option() == (
        None if xv == yv == inf else min(v for v in (x, y) if v is not None)
    )


def test_printing() -> None:
    assert str(Antichain.of(5)) == "{5}"
    assert str(Antichain.empty()) == "{}"
    assert repr(Antichain.of(5)) == "Antichain({5})"
    assert str(Antichain([Product(2, 1), Product(1, 2)])) == "{(1, 2), (2, 1)}"


def test_step_back_saturates_and_keeps_empty() -> None:
    assert Antichain.of(5).step_back() == Antichain.of(4)
    assert Antichain.of(0).step_back() == Antichain.of(0)
    assert Antichain.empty().step_back() == Antichain.empty()


def test_frontier_has_no_truth_value() -> None:
    with pytest.raises(TypeError, match="is_empty"):
        bool(Antichain.of(3))


@pytest.mark.parametrize("bad", [-1, 2**64, True, "3", 1.5])
def test_rejects_bad_elements(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        Antichain([bad])  # type: ignore[list-item]


def test_frontier_bridge() -> None:
    assert frontier(None) == Antichain.empty()
    assert frontier(7) == Antichain.of(7)
