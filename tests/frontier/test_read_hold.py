"""Read hold accounting: holds and releases sum to zero."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.errors import ReadHoldDowngradeError, ReadHoldMismatch
from spate.frontier import Antichain, ChangeBatch, MutableAntichain, ReadHold
from spate.ids import GlobalId

ID = GlobalId.user(1)


class Issuer:
    """Counts every hold it issued, as a controller does."""

    def __init__(self) -> None:
        self.capabilities: MutableAntichain[int] = MutableAntichain()
        self.received: list[ChangeBatch[int]] = []

    def changes(self, id: GlobalId, batch: ChangeBatch[int]) -> None:
        assert id == ID
        self.received.append(batch.copy())
        self.capabilities.update_iter(batch.items())

    def acquire(self, since: int) -> ReadHold:
        self.capabilities.update_iter([(since, 1)])
        return ReadHold(ID, Antichain.of(since), self.changes)


@given(
    st.integers(0, 20),
    st.lists(
        st.tuples(
            st.sampled_from(["downgrade", "clone", "release", "merge"]),
            st.integers(0, 30),
            st.integers(0, 99),
        ),
        max_size=40,
    ),
)
def test_holds_and_releases_sum_to_the_live_holds(
    first: int, ops: list[tuple[str, int, int]]
) -> None:
    issuer = Issuer()
    holds = [issuer.acquire(first)]
    for op, time, pick in ops:
        h = holds[pick % len(holds)]
        if op == "downgrade":
            if h.since.less_equal(Antichain.of(time)):
                h.try_downgrade(Antichain.of(time))
            else:
                before = issuer.capabilities.counts()
                with pytest.raises(ReadHoldDowngradeError):
                    h.try_downgrade(Antichain.of(time))
                assert issuer.capabilities.counts() == before
        elif op == "clone":
            holds.append(h.clone())
        elif op == "release":
            h.release()
        else:
            other = holds[(pick + 1) % len(holds)]
            if other is not h:
                expected = h.since.meet(other.since)
                h.merge_assign(other)
                assert h.since == expected
                assert other.is_released()
        # The issuer's counts equal exactly the live holds.
        live: dict[int, int] = {}
        for x in holds:
            for t in x.since:
                live[t] = live.get(t, 0) + 1
        assert dict(issuer.capabilities.counts()) == live
    for h in holds:
        h.release()
    assert issuer.capabilities.is_empty()
    total: ChangeBatch[int] = ChangeBatch([(first, 1)])
    for batch in issuer.received:
        total.extend(batch.items())
    assert total.is_empty()


def test_downgrade_below_since_is_an_error_naming_both() -> None:
    issuer = Issuer()
    h = issuer.acquire(10)
    with pytest.raises(
        ReadHoldDowngradeError, match=r"u1: cannot downgrade to \{5\}.*since \{10\}"
    ):
        h.try_downgrade(Antichain.of(5))
    h.try_downgrade(Antichain.of(10))  # same frontier: no-op
    assert issuer.received == []


def test_release_is_idempotent_and_released_hold_cannot_move() -> None:
    issuer = Issuer()
    h = issuer.acquire(3)
    h.release()
    h.release()
    assert len(issuer.received) == 1
    with pytest.raises(ReadHoldDowngradeError):
        h.try_downgrade(Antichain.of(4))
    assert h.clone().is_released()


def test_merge_requires_same_collection_and_issuer() -> None:
    a, b = Issuer(), Issuer()
    ha, hb = a.acquire(1), b.acquire(1)
    with pytest.raises(ReadHoldMismatch, match="share collection and issuer"):
        ha.merge_assign(hb)
    with pytest.raises(ReadHoldMismatch):
        ha.merge_assign(ha)
