"""``spate pipeline``: Spark Declarative Pipelines, maintained incrementally.

* ``spate pipeline dry-run SPEC``: load and translate every dataset, print the graph; a dataset
  that cannot be maintained fails here, naming the dataset, the operator and the line.
* ``spate pipeline run SPEC [--data-dir DIR]``: bring every dataset up to date, processing only
  the input files that changed since the last run (state in DIR, by default
  ``<storage>/spate``), and write each as Parquet under the pipeline's storage. The replica is
  left running with the datasets' dataflows for the next run (``--stop-replicas`` stops it).
* ``spate pipeline serve SPEC [--data-dir DIR] [--listen host:port]``: keep them up to date as
  files arrive, and serve them over the PostgreSQL wire protocol, each by its dataset name. It
  adopts the replica a run kept (both start replicas with the same ``--keep-for``, so the
  command matches); Ctrl-C or SIGTERM stops the server, the pipeline's threads, then the
  environment and its replicas (``--keep-replicas`` leaves them for the next run).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from spate.cli.app import app

if TYPE_CHECKING:
    from spate.config import Settings
    from spate.environment.api import Environment
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


_KEEP_FOR = Annotated[
    float,
    typer.Option(
        "--keep-for",
        help="seconds a replica this command starts waits for the next run before it exits",
    ),
]


def _settings(keep_for: float) -> Settings:
    """The settings with the replicas' grace period ``keep_for``: ``run`` and ``serve`` start
    replicas with the same command, so each adopts the replica the other left running."""
    from spate.config import load_settings

    if not keep_for > 0:
        raise typer.BadParameter(f"--keep-for must be positive, got {keep_for}")
    settings = load_settings()
    replicas = settings.replicas.model_copy(update={"grace_period_s": keep_for})
    return settings.model_copy(update={"replicas": replicas})


def _data_dir(spec: Path, data_dir: Path | None) -> Path:
    """The pipeline's data directory: ``--data-dir``, or ``<storage>/spate``."""
    from spate.pipelines import load_spec

    return data_dir or load_spec(spec).storage_dir() / "spate"


def _load(spec: Path, data: Path, reload: bool, env: Environment) -> CompiledPipeline:
    """The pipeline (its loaded definitions kept in the data directory), translated against
    its datasets and the tables, sources and views ``env`` has (``spark.read.table``)."""
    from spate.pipelines import load_pipeline
    from spate.pipelines.runner import relation_columns

    return load_pipeline(spec, cache=data, reload=reload, existing=relation_columns(env))


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
    keep_for: _KEEP_FOR = 3600.0,
    reload: _RELOAD = False,
) -> None:
    """Bring every dataset up to date, processing only what changed since the last run."""
    from spate.environment.api import Environment
    from spate.pipelines import PipelineRunner

    started = time.perf_counter()
    settings = _settings(keep_for)
    data = _data_dir(spec, data_dir)
    env = Environment.open(data, settings=settings)
    opened = time.perf_counter()
    try:
        pipeline = _load(spec, data, reload, env)
        loaded = time.perf_counter()
        result = PipelineRunner(env, pipeline, data).run()
    finally:
        closing = time.perf_counter()
        env.close(stop_replicas=not keep_replicas)
    phases = [("open", opened - started), ("load", loaded - opened), *result.seconds]
    phases.append(("close", time.perf_counter() - closing))
    typer.echo(
        f"pipeline {pipeline.spec.name}: {len(pipeline.datasets)} datasets up to date at "
        f"{result.timestamp}; {result.files_changed} input file(s) changed, "
        f"{result.rows_read} row(s) read from them; created: {', '.join(result.created) or '-'}"
        f"; {time.perf_counter() - started:.1f} s ("
        + ", ".join(f"{name} {s:.1f}" for name, s in phases)
        + ")"
    )
    for c in result.expectations:
        typer.echo(
            f"  expectation {c.dataset}.{c.expectation} ({c.action}): {c.passed} passed, "
            f"{c.failed} failed"
        )
    _exit_now()


def _exit_now() -> NoReturn:
    """End the process now, its work done: the environment is closed (every write durable,
    its threads stopped) and the summary printed. Tearing the interpreter down (a thousand
    modules, pyarrow's and the environment's objects) would add 1.5-3 s of wall time to every
    run on a loaded machine, for nothing."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pipeline_app.command("serve")
def serve(
    spec: _SPEC,
    data_dir: _DATA = None,
    listen: Annotated[str, typer.Option(help="host:port to listen on")] = "127.0.0.1:6875",
    interval: Annotated[float, typer.Option(help="seconds between looks at the inputs")] = 0.05,
    outputs_every: Annotated[
        float,
        typer.Option(
            "--outputs-every",
            help="seconds between writes of the datasets' Parquet (each rewrites every dataset)",
        ),
    ] = 30.0,
    reload: _RELOAD = False,
    keep_replicas: Annotated[
        bool,
        typer.Option(
            "--keep-replicas/--stop-replicas",
            help="on Ctrl-C or SIGTERM, leave the replica running for the next run to adopt "
            "(default: stop it, as spate serve does)",
        ),
    ] = False,
    keep_for: _KEEP_FOR = 3600.0,
) -> None:
    """Keep every dataset up to date as input files change, and serve them over pgwire."""
    from spate.cli.serve import _serve, parse_listen, stopping_message
    from spate.environment.api import Environment
    from spate.pgwire import eventloop
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import Server, ServerConfig, check_config
    from spate.pipelines import PipelineRunner, keep_up_to_date

    host, port = parse_listen(listen)
    config = ServerConfig(host=host, port=port)
    check_config(config)
    settings = _settings(keep_for)
    data = _data_dir(spec, data_dir)
    # SIGTERM before the server listens (the first run) stops as Ctrl-C does: through the
    # `finally` below, which closes the environment and its replicas
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    env = Environment.open(data, settings=settings)
    stop = threading.Event()
    loop: threading.Thread | None = None
    try:
        pipeline = _load(spec, data, reload, env)
        runner = PipelineRunner(env, pipeline, data)
        runner.run()
        loop = threading.Thread(
            target=keep_up_to_date, args=(runner, stop),
            kwargs={"interval": interval, "outputs_every": outputs_every},
            name="pipeline-inputs", daemon=True,
        )  # fmt: skip
        loop.start()
        eventloop.run(_serve(Server(EnvironmentEngine(env), config), data, host, False))
    finally:
        # the pipeline's threads end first (a Parquet write in progress is canceled): one left
        # waiting on the closed environment would hold up the process's exit
        stop.set()
        replicas = sum(len(c.replicas) for c in env.runtime.catalog.clusters)
        typer.echo(stopping_message(replicas, keep_replicas), err=True)
        if loop is not None:
            loop.join(60)
        env.close(stop_replicas=not keep_replicas)
