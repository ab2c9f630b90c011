"""A real dbt run (dbt-postgres, in its own virtualenv) against spate's wire server and against
the local PostgreSQL, the same project on the same source rows: a view model, a table model
and a materialized view model over it, ``not_null`` and ``unique`` tests. ``dbt run`` twice — the second run replaces both
relations (dbt's ``ALTER … RENAME``, ``DROP … CASCADE`` in transactions) and adds a column to
the table model —, then ``dbt test`` on spate; the models' rows must equal PostgreSQL's. The
two targets' dbt processes run side by side.

dbt's dependencies do not fit constraints.txt, so the fixture installs dbt-core and
dbt-postgres from PyPI into ``~/.cache/spate-test/dbt-venv`` once and reuses it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from tests.pgwire._pg_scratch import pg_scratch

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

PG_URL = os.environ.get("SPATE_TEST_POSTGRES_URL")
PROJECT = Path(__file__).parent / "dbt_project"
VENV = Path.home() / ".cache" / "spate-test" / "dbt-venv"
DBT_REQUIREMENTS = ("dbt-core>=1.10,<1.11", "dbt-postgres>=1.9,<1.10")
SOURCE_DDL = ["CREATE TABLE raw_orders (id integer NOT NULL, amount integer)"]
FIRST = [(1, 10), (2, 0), (3, 7)]
SECOND = [(4, 5), (5, -1)]


@pytest.fixture(scope="module")
def dbt() -> Path:
    """The dbt executable of the test's own virtualenv (created on first use)."""
    exe = VENV / "bin" / "dbt"
    if not exe.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        try:
            subprocess.run([base, "-m", "venv", str(VENV)], check=True, timeout=300)
            pip = [str(VENV / "bin" / "pip"), "install", "-q", *DBT_REQUIREMENTS]
            subprocess.run(pip, check=True, timeout=900, capture_output=True)
        except (subprocess.SubprocessError, OSError) as e:
            shutil.rmtree(VENV, ignore_errors=True)
            pytest.skip(f"dbt-postgres could not be installed from PyPI: {e}")
    return exe


@pytest.fixture(scope="module")
def spate_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    env = Environment.open(tmp_path_factory.mktemp("dbt") / "data")
    try:
        for statement in SOURCE_DDL:
            env.sql(statement)  # type: ignore[attr-defined]
        server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
        try:
            yield server.port
        finally:
            server.close()
    finally:
        env.close()


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    with pg_scratch(SOURCE_DDL, "dbt") as schema:
        yield schema


def _profiles(tmp: Path, spate_port: int, pg_schema: str) -> Path:
    assert PG_URL is not None
    pg = psycopg.conninfo.conninfo_to_dict(PG_URL)
    out = tmp / "profiles"
    out.mkdir()
    spate = (
        f"{{type: postgres, host: 127.0.0.1, port: {spate_port}, user: tester, password: x,"
        " dbname: spate, schema: public, threads: 1, sslmode: disable}"
    )
    postgres = (
        f"{{type: postgres, host: {pg.get('host', '127.0.0.1')}, port: {pg.get('port', '5432')},"
        f" user: {pg.get('user', 'postgres')}, password: '{pg.get('password', '')}',"
        f" dbname: {pg['dbname']}, schema: {pg_schema}, threads: 1}}"
    )
    (out / "profiles.yml").write_text(
        f"probe:\n  target: spate\n  outputs:\n    spate: {spate}\n    postgres: {postgres}\n"
    )
    return out


def _dbt(exe: Path, profiles: Path, work: Path, targets: list[str], *args: str) -> None:
    """``dbt args…`` on each target, the targets' runs at the same time (each its own
    process, log and target directory)."""
    env = dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1")
    runs = {}
    for target in targets:
        command = [str(exe), *args, "--target", target, "--profiles-dir", str(profiles)]
        command += ["--project-dir", str(work), "--target-path", f"target-{target}"]
        command += ["--log-path", f"logs-{target}", "--no-use-colors"]
        runs[target] = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=work,
        )
    for target, run in runs.items():
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0, f"dbt {' '.join(args)} on {target}:\n{out}"


def _insert(dsn: str, rows: list[tuple[int, int]], schema: str | None) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        table = f"{schema}.raw_orders" if schema else "raw_orders"
        for row in rows:
            conn.execute(f"INSERT INTO {table} VALUES (%s, %s)", row)


def _rows(dsn: str, schema: str | None) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        if schema:
            conn.execute(f"SET search_path = {schema}")
        out: dict[str, Any] = {}
        for name in ("orders_v", "orders_t", "orders_mv"):
            cur = conn.execute(f"SELECT * FROM {name}")
            out[name] = ([d.name for d in cur.description or ()], sorted(cur.fetchall()))
        kinds = conn.execute(
            "SELECT table_name, table_type FROM information_schema.tables"
            " WHERE table_schema = current_schema() ORDER BY 1"
        ).fetchall()
        out["relations"] = kinds
        return out


def test_dbt_run_twice_and_test_as_on_postgres(
    dbt: Path, spate_port: int, pg_schema: str, tmp_path: Path
) -> None:
    assert PG_URL is not None
    profiles = _profiles(tmp_path, spate_port, pg_schema)
    work = tmp_path / "project"
    shutil.copytree(PROJECT, work)
    spate_dsn = f"host=127.0.0.1 port={spate_port} user=tester dbname=spate sslmode=disable"
    targets = {"spate": (spate_dsn, None), "postgres": (PG_URL, pg_schema)}
    for dsn, schema in targets.values():
        _insert(dsn, FIRST, schema)
    _dbt(dbt, profiles, work, list(targets), "run")
    first = {t: _rows(dsn, schema) for t, (dsn, schema) in targets.items()}
    assert first["spate"] == first["postgres"]
    assert first["spate"]["orders_t"] == (["id", "doubled"], [(1, 20), (3, 14)])
    assert first["spate"]["orders_mv"] == (["n", "total"], [(2, 17)])
    for dsn, schema in targets.values():
        _insert(dsn, SECOND, schema)
    extra = ["--vars", "{extra_column: ', id % 2 AS parity'}"]
    _dbt(dbt, profiles, work, list(targets), "run", *extra)  # replaces both relations
    _dbt(dbt, profiles, work, ["spate"], "test", *extra)
    second = {t: _rows(dsn, schema) for t, (dsn, schema) in targets.items()}
    assert second["spate"] == second["postgres"]
    assert second["spate"]["orders_t"] == (
        ["id", "doubled", "parity"],
        [(1, 20, 1), (3, 14, 1), (4, 10, 0)],
    )
    # dbt refreshes an unchanged materialized view (PostgreSQL recomputes it; spate's is
    # always current and REFRESH changes nothing)
    assert second["spate"]["orders_mv"] == (["n", "total"], [(3, 22)])
    # nothing of dbt's intermediate relations is left behind
    names = [name for name, _ in second["spate"]["relations"]]
    assert names == ["orders_t", "orders_v", "raw_orders"]
