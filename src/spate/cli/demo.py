"""``spate demo``: the live auction view."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spate.cli.app import app, settings


@app.command()
def demo(
    duration: Annotated[float, typer.Option(help="seconds of live view")] = 60.0,
    data_dir: Annotated[
        Path | None, typer.Option(help="keep the data here (default: a temporary directory)")
    ] = None,
    rate: Annotated[int, typer.Option(help="auction events per second")] = 200,
    kill: Annotated[bool, typer.Option(help="kill a replica halfway")] = True,
    spark_master: Annotated[
        str | None, typer.Option(help="the replicas' Spark master (default: settings)")
    ] = None,
) -> None:
    """The main job: a live auction view, on embedded defaults (SQLite, files, local Spark)."""
    from spate.environment.demo import run_demo

    effective = settings()
    if spark_master is not None:
        effective = effective.model_copy(
            update={"spark": effective.spark.model_copy(update={"master": spark_master})}
        )
    report = run_demo(data_dir, duration_s=duration, rate=rate, kill=kill, settings=effective)
    if report.matches_recomputation is False:
        raise typer.Exit(1)
