"""A throwaway Spark standalone cluster on 127.0.0.1, started from the PySpark distribution.

:func:`standalone_cluster` starts one master and one worker (``bin/spark-class`` of the
``pyspark`` package: the pip package has no ``sbin/start-*.sh``) as children in their own
process groups, waits until the worker has registered with the master, and on exit kills both
groups — the executors the worker started and their Python workers with them. Everything it
writes (logs, the worker's work directory, Spark's local directories) lands under ``root``.

It is the scale-out path of the tests: a compute replica started with
``--spark-master <cluster.url>`` runs its Spark jobs in executor JVMs on the worker rather than
inside its own driver JVM.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from spate.orchestrator.process import allocate_port
from spate.testing.process import spate_env

STARTUP_TIMEOUT_S: Final = 120.0
HOST: Final = "127.0.0.1"


def spark_home() -> Path:
    """The directory of the installed ``pyspark`` package (it has ``bin/`` and ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def unavailable_reason() -> str | None:
    """Why a standalone cluster cannot start here (``None`` if it can)."""
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        return "no java on PATH and JAVA_HOME is not set: cannot start a Spark cluster"
    try:
        home = spark_home()
    except ImportError:
        return "pyspark is not installed"
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        return f"{home} is not a Spark distribution (no bin/spark-class or jars/)"
    return None


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL whatever is left of it, reap the daemon."""
        pgid = self.proc.pid  # its own session: the group id is its pid
        for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 15.0)):
            with suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace)
        # Children of the daemon (executor JVMs, Python workers) are in the same group.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class SparkStandalone:
    """A running master and worker (see :func:`standalone_cluster`)."""

    root: Path
    master_port: int
    master_ui_port: int
    worker_ui_port: int
    work_dir: Path
    daemons: list[_Daemon] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The master URL to give ``--spark-master``: ``spark://127.0.0.1:<port>``."""
        return f"spark://{HOST}:{self.master_port}"

    def master_state(self) -> dict[str, Any]:
        """The master's status JSON (``aliveworkers``, ``activeapps``, ``completedapps``…)."""
        return _get_json(self.master_ui_port)

    def worker_state(self) -> dict[str, Any]:
        """The worker's status JSON (``executors``, ``finishedexecutors``, ``coresused``…)."""
        return _get_json(self.worker_ui_port)

    def executor_logs(self) -> str:
        """The stderr of every executor the worker has run (its work directory)."""
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.work_dir.glob("app-*/*/stderr"))
        )

    def logs(self, n: int = 40) -> str:
        return "\n".join(f"--- {d.name} ({d.log}):\n{d.log_tail(n)}" for d in self.daemons)

    def stop(self) -> None:
        """Stop the worker (and its executors), then the master (idempotent)."""
        for d in reversed(self.daemons):
            d.stop()

    def running_groups(self) -> list[int]:
        """The process groups of the daemons that still have a live member (after :meth:`stop`:
        none, or something escaped)."""
        return [d.proc.pid for d in self.daemons if _group_alive(d.proc.pid)]


def _get_json(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{HOST}:{port}/json/", timeout=5) as resp:
        data: dict[str, Any] = json.loads(resp.read().decode())
        return data


def _daemon_env(root: Path, extra: dict[str, str] | None) -> dict[str, str]:
    conf = root / "conf"  # empty: no spark-defaults.conf or spark-env.sh of the host leaks in
    local = root / "local"
    conf.mkdir(parents=True, exist_ok=True)
    local.mkdir(parents=True, exist_ok=True)
    env = spate_env(
        {
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOCAL_DIRS": str(local),
            "SPARK_LOG_DIR": str(root / "logs"),
            "SPARK_DAEMON_MEMORY": "256m",
        }
    )
    if extra:
        env.update(extra)
    return env


def _spawn(name: str, argv: list[str], root: Path, env: dict[str, str]) -> _Daemon:
    log = root / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(  # noqa: S603 - the installed Spark's own launcher
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return _Daemon(name, proc, log)


def start_standalone(
    root: Path,
    *,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = STARTUP_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> SparkStandalone:
    """Start a master and one worker (``cores``, ``memory``) and wait for the registration."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    root.mkdir(parents=True, exist_ok=True)
    daemon_env = _daemon_env(root, env)
    spark_class = str(spark_home() / "bin" / "spark-class")
    cluster = SparkStandalone(
        root=root,
        master_port=allocate_port(HOST),
        master_ui_port=allocate_port(HOST),
        worker_ui_port=allocate_port(HOST),
        work_dir=root / "work",
    )
    cluster.work_dir.mkdir(exist_ok=True)
    try:
        cluster.daemons.append(
            _spawn(
                "spark-master",
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    HOST,
                    "--port",
                    str(cluster.master_port),
                    "--webui-port",
                    str(cluster.master_ui_port),
                ],
                root,
                daemon_env,
            )
        )
        # A worker started before its master listens registers only on a later retry (seconds
        # later): start it once the master is up.
        _wait_until(cluster, timeout, "the master to listen", _master_alive)
        cluster.daemons.append(
            _spawn(
                "spark-worker",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    cluster.url,
                    "--host",
                    HOST,
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(cluster.worker_ui_port),
                    "--work-dir",
                    str(cluster.work_dir),
                ],
                root,
                daemon_env,
            )
        )
        _wait_until(cluster, timeout, "a worker to register", _worker_registered)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _master_alive(cluster: SparkStandalone) -> bool:
    return cluster.master_state().get("status") == "ALIVE"


def _worker_registered(cluster: SparkStandalone) -> bool:
    return int(cluster.master_state().get("aliveworkers", 0)) >= 1


def _wait_until(
    cluster: SparkStandalone, timeout: float, what: str, ready: Callable[[SparkStandalone], bool]
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for d in cluster.daemons:
            if d.proc.poll() is not None:
                raise RuntimeError(
                    f"{d.name} exited with code {d.proc.returncode}:\n{cluster.logs()}"
                )
        with suppress(OSError, ValueError):  # the web UI is not up yet
            if ready(cluster):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"timed out after {timeout:.0f} s waiting for {what} ({cluster.url}):\n"
                f"{cluster.logs()}"
            )
        time.sleep(0.2)


@contextmanager
def standalone_cluster(
    root: Path,
    *,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = STARTUP_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> Iterator[SparkStandalone]:
    """A master and one worker for the duration of the ``with`` block (see the module doc)."""
    cluster = start_standalone(root, cores=cores, memory=memory, timeout=timeout, env=env)
    try:
        yield cluster
    finally:
        cluster.stop()
