"""``spate pipeline``: Spark Declarative Pipelines, maintained incrementally.

* ``spate pipeline dry-run SPEC``: load and translate every dataset, print the graph; a dataset
  that cannot be maintained fails here, naming the dataset, the operator and the line.
* ``spate pipeline run SPEC [--data-dir DIR]``: bring every dataset up to date, processing only
  the input files that changed since the last run (state in DIR, by default
  ``<storage>/spate``), and write each as Parquet under the pipeline's storage.
* ``spate pipeline serve SPEC [--data-dir DIR] [--listen host:port]``: keep them up to date as
  files arrive, and serve them over the PostgreSQL wire protocol, each by its dataset name.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Annotated

import typer

from spate.cli.app import app

pipeline_app = typer.Typer(
    help="Spark Declarative Pipelines (pipeline.yml), maintained incrementally.",
    no_args_is_help=True,
)
app.add_typer(pipeline_app, name="pipeline")

_SPEC = Annotated[Path, typer.Argument(help="pipeline.yml, or the directory holding it")]
_DATA = Annotated[
    Path | None,
    typer.Option("--data-dir", help="spate's state (default: <storage>/spate)"),
]


@pipeline_app.command("dry-run")
def dry_run(spec: _SPEC) -> None:
    """Validate the pipeline and print its graph; creates nothing."""
    from spate.pipelines import load_pipeline

    typer.echo(load_pipeline(spec).describe())


@pipeline_app.command("run")
def run(
    spec: _SPEC,
    data_dir: _DATA = None,
    keep_replicas: Annotated[
        bool,
        typer.Option(
            "--keep-replicas",
            help="leave the replica running for the next run to adopt (no restart per run)",
        ),
    ] = False,
) -> None:
    """Bring every dataset up to date, processing only what changed since the last run."""
    from spate.environment.api import Environment
    from spate.pipelines import PipelineRunner, load_pipeline

    pipeline = load_pipeline(spec)
    data = data_dir or pipeline.spec.storage_dir() / "spate"
    env = Environment.open(data)
    try:
        result = PipelineRunner(env, pipeline, data).run()
    finally:
        env.close(stop_replicas=not keep_replicas)
    typer.echo(
        f"pipeline {pipeline.spec.name}: {len(pipeline.datasets)} datasets up to date at "
        f"{result.timestamp}; {result.files_changed} input file(s) changed; created: "
        f"{', '.join(result.created) or '-'}"
    )


@pipeline_app.command("serve")
def serve(
    spec: _SPEC,
    data_dir: _DATA = None,
    listen: Annotated[str, typer.Option(help="host:port to listen on")] = "127.0.0.1:6875",
    interval: Annotated[float, typer.Option(help="seconds between looks at the inputs")] = 1.0,
) -> None:
    """Keep every dataset up to date as input files change, and serve them over pgwire."""
    from spate.cli.serve import _serve, parse_listen
    from spate.environment.api import Environment
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import Server, ServerConfig, check_config
    from spate.pipelines import PipelineRunner, keep_up_to_date, load_pipeline

    host, port = parse_listen(listen)
    config = ServerConfig(host=host, port=port)
    check_config(config)
    pipeline = load_pipeline(spec)
    data = data_dir or pipeline.spec.storage_dir() / "spate"
    env = Environment.open(data)
    stop = threading.Event()
    try:
        runner = PipelineRunner(env, pipeline, data)
        runner.run()
        loop = threading.Thread(
            target=keep_up_to_date, args=(runner, stop), kwargs={"interval": interval},
            name="pipeline-inputs", daemon=True,
        )  # fmt: skip
        loop.start()
        asyncio.run(_serve(Server(EnvironmentEngine(env), config), data, host, False))
    finally:
        stop.set()
        env.close()
