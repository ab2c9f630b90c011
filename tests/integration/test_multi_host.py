"""spate across hosts, for real: network namespaces as machines.

Hosts (``tests/integration/_netns.py``): ``env`` runs the environment (controllers), ``c1`` and
``c2`` one compute replica each (``spate replica --listen`` placed with ``create_cluster(
replicas={"r1": "10.231.0.11:6875", ...})``), ``spark`` a Spark standalone master and worker from
the PySpark distribution that runs both replicas' jobs, and ``infra`` the S3 server (moto)
holding persist's blobs plus a relay to the test PostgreSQL holding consensus (the relay's
listening socket lives in the network, its upstream is this machine's loopback: PostgreSQL's
configuration and this machine's interfaces stay untouched, and no traffic leaves loopback and
the namespaces).

The workload (``_multi_host_workload.py``, run on ``env``): tables, a materialized view with a
join and a top-k, an index, writes; every process of host ``c1`` is killed; writes and reads go
on (served by ``c2``); the view equals its recomputation before and after; a subscribe that
runs across the loss accumulates to the recomputation. Skipped, with the reason, where
namespaces cannot be created (not root, no ``ip``) or Spark cannot start; the namespaces are
always deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest

from spate.environment.layout import Layout
from spate.testing.process import spate_env
from spate.testing.spark_cluster import spark_home
from spate.testing.spark_cluster import unavailable_reason as spark_unavailable
from tests.integration._netns import INFRA_IP, Hosts, cleanup_stale, unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

WORKLOAD = Path(__file__).with_name("_multi_host_workload.py")
REPLICA_PORT = 6875
MASTER_PORT = 7077
MOTO_PORT = 5000
PG_PORT = 5432


def _postgres() -> urllib.parse.SplitResult:
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("SPATE_TEST_POSTGRES_URL is not set: no PostgreSQL for consensus")
    parts = urllib.parse.urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        pytest.skip(f"the multi-host test relays only a loopback PostgreSQL, not {parts.hostname}")
    return parts


def _wait_log(hosts: Hosts, name: str, needle: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in hosts.log(name, tail=400):
        assert time.monotonic() < deadline, f"{name}: no {needle!r}:\n{hosts.log(name)}"
        time.sleep(0.5)


def test_tables_views_index_subscribe_across_hosts_survive_losing_a_replica_host(
    tmp_path: Path,
) -> None:
    reason = unavailable_reason() or spark_unavailable()
    if reason is not None:
        pytest.skip(f"multi-host test: {reason}")
    moto = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    if not Path(moto).exists():
        pytest.skip("moto_server (moto[server]) is not installed")
    pg = _postgres()
    import psycopg

    cleanup_stale()
    seed = int(os.environ.get("SPATE_TEST_SEED", str(int(time.time()) % 100_000)))
    print(f"seed={seed}")
    schema = f"spate_mh_{uuid.uuid4().hex[:8]}"
    data = tmp_path / "data"
    Layout(data).ensure()  # the transport secret every host reads (a shared filesystem here)
    aws = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env = spate_env({**aws, "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": str(spark_home())})
    env.pop("SPATE_CONFIG", None)
    hosts = Hosts(tmp_path / "hosts")
    try:
        with hosts:
            c1, c2 = hosts.add("c1", 11), hosts.add("c2", 12)
            spark = hosts.add("spark", 20)
            hosts.add("env", 10)
            hosts.forward(PG_PORT, (pg.hostname or "127.0.0.1", pg.port or 5432))
            hosts.spawn("infra", "moto", [moto, "-H", INFRA_IP, "-p", str(MOTO_PORT)], env)

            spark_root = tmp_path / "spark"
            (spark_root / "conf").mkdir(parents=True)
            spark_env = {
                **env,
                "SPARK_CONF_DIR": str(spark_root / "conf"),
                "SPARK_LOCAL_IP": spark,
                "SPARK_LOCAL_DIRS": str(spark_root / "local"),
                "SPARK_LOG_DIR": str(spark_root / "logs"),
                "SPARK_DAEMON_MEMORY": "256m",
            }
            spark_class = str(spark_home() / "bin" / "spark-class")
            master = f"spark://{spark}:{MASTER_PORT}"
            hosts.spawn("spark", "spark-master", [spark_class,
                        "org.apache.spark.deploy.master.Master", "--host", spark,
                        "--port", str(MASTER_PORT), "--webui-port", "8080"], spark_env)  # fmt: skip
            _wait_log(hosts, "spark-master", "ALIVE")
            hosts.spawn("spark", "spark-worker", [spark_class,
                        "org.apache.spark.deploy.worker.Worker", master, "--host", spark,
                        "--cores", "2", "--memory", "2g", "--webui-port", "8081",
                        "--work-dir", str(spark_root / "work")], spark_env)  # fmt: skip
            _wait_log(hosts, "spark-worker", "Successfully registered with master")
            _wait_log(hosts, "moto", "Running on")

            bucket = f"spate-mh-{seed}"
            blob = f"s3://{bucket}/p?endpoint=http://{INFRA_IP}:{MOTO_PORT}&region=us-east-1"
            consensus = f"postgresql://{pg.username or 'postgres'}@{INFRA_IP}:{PG_PORT}{pg.path}"
            consensus += f"?schema={schema}"
            for name, host, ip in (("r1", "c1", c1), ("r2", "c2", c2)):
                hosts.spawn(host, f"replica-{name}", [sys.executable, "-m", "spate", "replica",
                    "--role", "compute", "--listen", f"{ip}:{REPLICA_PORT}",
                    "--secret-file", str(data / "secret"),
                    "--scratch-dir", str(tmp_path / f"scratch-{name}"),
                    "--blob-uri", blob, "--consensus-uri", consensus, "--replica-id", name,
                    "--spark-master", master, "--driver-memory", "512m",
                    "--spark-conf", f"spark.driver.host={ip}",
                    "--spark-conf", f"spark.driver.bindAddress={ip}",
                    "--spark-conf", "spark.cores.max=1",
                    "--spark-conf", "spark.executor.cores=1",
                    "--spark-conf", "spark.executor.memory=512m",
                ], {**env, "SPARK_LOCAL_IP": ip})  # fmt: skip
            for name in ("r1", "r2"):
                _wait_log(hosts, f"replica-{name}", "spate compute replica listening on")

            cfg = {
                "seed": seed,
                "data_dir": str(data),
                "bucket": bucket,
                "s3_endpoint": f"http://{INFRA_IP}:{MOTO_PORT}",
                "blob": blob,
                "consensus": consensus,
                "spark_master": master,
                "replicas": {"r1": f"{c1}:{REPLICA_PORT}", "r2": f"{c2}:{REPLICA_PORT}"},
                "kill_ns": hosts.ns("c1"),
            }
            proc = subprocess.run(
                ["ip", "netns", "exec", hosts.ns("env"), sys.executable, str(WORKLOAD),
                 json.dumps(cfg)],
                capture_output=True, text=True, env=env, timeout=2000,
            )  # fmt: skip
            phases = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
            for p in phases:
                print(p)
            logs = "\n".join(
                f"--- {n}:\n{hosts.log(n, 30)}"
                for n in ("replica-r1", "replica-r2", "spark-worker")
            )
            assert phases and phases[-1]["phase"] == "done", f"{proc.stderr[-6000:]}\n{logs}"
            done = phases[-1]
            assert done["ok"], f"checks failed: {phases}\n{proc.stderr[-4000:]}"
            assert proc.returncode == 0
            killed = next(p for p in phases if p["phase"] == "killed")
            assert killed["pids"], "nothing ran on host c1 to kill"
            assert hosts.pids("c1") == []
    finally:
        hosts.close()
        with psycopg.connect(os.environ["SPATE_TEST_POSTGRES_URL"], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    assert hosts.remaining() == [], "namespaces left behind"
