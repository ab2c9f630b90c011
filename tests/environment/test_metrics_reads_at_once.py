"""Reads answered at once are counted in bulk (EnvironmentMetrics.read_at_once_done): every
one of them is in ``spate_peeks_total`` and ``spate_peek_seconds`` at the next collection,
as a read counted one at a time is, and without a collection after QUICK_BATCH of them."""

from __future__ import annotations

import time

from spate.environment.metrics import QUICK_BATCH, EnvironmentMetrics


def _samples(m: EnvironmentMetrics) -> dict[str, float]:
    get = m.registry.get_sample_value
    return {
        "ok": get("spate_peeks_total", {"outcome": "ok"}) or 0.0,
        "count": get("spate_peek_seconds_count") or 0.0,
        "first": get("spate_peek_seconds_bucket", {"le": "0.001"}) or 0.0,
        "slow": get("spate_peek_seconds_bucket", {"le": "0.5"}) or 0.0,
        "sum": get("spate_peek_seconds_sum") or 0.0,
    }


def test_reads_at_once_are_counted_as_reads_are() -> None:
    m = EnvironmentMetrics()
    m.peek_done(time.monotonic(), failed=False)  # one read counted as usual
    for _ in range(3):
        m.read_at_once_done(time.monotonic())
    got = _samples(m)
    assert got["ok"] == 4 and got["count"] == 4 and got["first"] == 4
    assert 0 <= got["sum"] < 0.004
    # one that took longer than the first bucket: observed as it is
    m.read_at_once_done(time.monotonic() - 0.2)
    got = _samples(m)
    assert got["ok"] == 5 and got["count"] == 5 and got["first"] == 4 and got["slow"] == 5
    assert got["sum"] >= 0.2


def test_a_batch_goes_into_the_series_without_a_collection() -> None:
    m = EnvironmentMetrics()
    for _ in range(QUICK_BATCH + 2):
        m.read_at_once_done(time.monotonic())
    # read the series' own values (no collection: that would add the rest)
    assert m.peeks.labels("ok")._value.get() == QUICK_BATCH
    assert m.peek_seconds._buckets[0].get() == QUICK_BATCH
    assert _samples(m)["ok"] == QUICK_BATCH + 2  # a collection adds the rest
    assert _samples(m)["count"] == QUICK_BATCH + 2
