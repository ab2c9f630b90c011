"""``spate pipeline``: Spark Declarative Pipelines, maintained incrementally.

* ``spate pipeline dry-run SPEC``: load and translate every dataset, print the graph; a dataset
  that cannot be maintained fails here, naming the dataset, the operator and the line.
* ``spate pipeline run SPEC [--data-dir DIR]``: bring every dataset up to date, processing only
  the input files that changed since the last run (state in DIR, by default
  ``<storage>/spate``), and write each as Parquet under the pipeline's storage. The replica is
  left running with the datasets' dataflows for the next run (``--stop-replicas`` stops it).
* ``spate pipeline serve SPEC [--data-dir DIR] [--listen host:port]``: keep them up to date as
  files arrive, and serve them over the PostgreSQL wire protocol, each by its dataset name.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from spate.cli.app import app

if TYPE_CHECKING:
    from spate.pipelines import CompiledPipeline

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


_RELOAD = Annotated[
    bool,
    typer.Option(
        "--reload",
        help="load the definition files again even if they are unchanged since the last run",
    ),
]


def _load(spec: Path, data_dir: Path | None, reload: bool) -> tuple[CompiledPipeline, Path]:
    """The pipeline (its loaded definitions kept in the data directory) and that directory."""
    from spate.pipelines import load_pipeline, load_spec

    data = data_dir or load_spec(spec).storage_dir() / "spate"
    return load_pipeline(spec, cache=data, reload=reload), data


@pipeline_app.command("run")
def run(
    spec: _SPEC,
    data_dir: _DATA = None,
    keep_replicas: Annotated[
        bool,
        typer.Option(
            "--keep-replicas/--stop-replicas",
            help="leave the replica running, its datasets' dataflows maintained, for the next "
            "run to adopt (the default); --stop-replicas stops it, and the next run rebuilds "
            "the dataflows from the stored inputs",
        ),
    ] = True,
    keep_for: Annotated[
        float,
        typer.Option(
            "--keep-for",
            help="seconds a replica this run starts waits for the next run before it exits",
        ),
    ] = 3600.0,
    reload: _RELOAD = False,
) -> None:
    """Bring every dataset up to date, processing only what changed since the last run."""
    from spate.config import load_settings
    from spate.environment.api import Environment
    from spate.pipelines import PipelineRunner

    if not keep_for > 0:
        raise typer.BadParameter(f"--keep-for must be positive, got {keep_for}")
    pipeline, data = _load(spec, data_dir, reload)
    settings = load_settings()
    if keep_replicas:
        replicas = settings.replicas.model_copy(update={"grace_period_s": keep_for})
        settings = settings.model_copy(update={"replicas": replicas})
    env = Environment.open(data, settings=settings)
    try:
        result = PipelineRunner(env, pipeline, data).run()
    finally:
        env.close(stop_replicas=not keep_replicas)
    typer.echo(
        f"pipeline {pipeline.spec.name}: {len(pipeline.datasets)} datasets up to date at "
        f"{result.timestamp}; {result.files_changed} input file(s) changed, "
        f"{result.rows_read} row(s) read from them; created: {', '.join(result.created) or '-'}"
    )


@pipeline_app.command("serve")
def serve(
    spec: _SPEC,
    data_dir: _DATA = None,
    listen: Annotated[str, typer.Option(help="host:port to listen on")] = "127.0.0.1:6875",
    interval: Annotated[float, typer.Option(help="seconds between looks at the inputs")] = 0.25,
    outputs_every: Annotated[
        float,
        typer.Option(
            "--outputs-every",
            help="seconds between writes of the datasets' Parquet (each rewrites every dataset)",
        ),
    ] = 30.0,
    reload: _RELOAD = False,
) -> None:
    """Keep every dataset up to date as input files change, and serve them over pgwire."""
    from spate.cli.serve import _serve, parse_listen
    from spate.environment.api import Environment
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import Server, ServerConfig, check_config
    from spate.pipelines import PipelineRunner, keep_up_to_date

    host, port = parse_listen(listen)
    config = ServerConfig(host=host, port=port)
    check_config(config)
    pipeline, data = _load(spec, data_dir, reload)
    env = Environment.open(data)
    stop = threading.Event()
    try:
        runner = PipelineRunner(env, pipeline, data)
        runner.run()
        loop = threading.Thread(
            target=keep_up_to_date, args=(runner, stop),
            kwargs={"interval": interval, "outputs_every": outputs_every},
            name="pipeline-inputs", daemon=True,
        )  # fmt: skip
        loop.start()
        asyncio.run(_serve(Server(EnvironmentEngine(env), config), data, host, False))
    finally:
        stop.set()
        env.close()
