"""``spate demo``, the main job, short and without the kill (test_replicas_e2e kills replicas)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from spate.environment.demo import run_demo

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


def test_the_demo_shows_the_live_view_and_it_equals_a_recomputation(tmp_path: Path) -> None:
    out = io.StringIO()
    report = run_demo(
        tmp_path / "data", duration_s=8, kill=False, console=Console(file=out, width=120)
    )
    assert report.hydrated_after_s is not None, out.getvalue()[-3000:]
    assert report.peeks > 0 and report.peek_errors == 0, out.getvalue()[-3000:]
    # The live reads show the view as it is now, not as it was when it was created (empty).
    assert report.shown_rows > 0, out.getvalue()[-3000:]
    assert report.read_lag_ms and min(report.read_lag_ms) < 30_000
    assert report.matches_recomputation is True
    assert report.final_rows > 0
    assert report.ingested["auction_bids"] > 0
