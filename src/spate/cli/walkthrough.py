"""``spate walkthrough``: frontiers, read policies and read holds on a worked example."""

from __future__ import annotations

from spate.cli.app import app


@app.command()
def walkthrough() -> None:
    """Frontiers, read policies and read holds deciding a since, on a worked example."""
    from spate.environment.walkthrough import run_demo

    run_demo()
