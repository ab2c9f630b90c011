"""The ``spate`` command as a user runs it: a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import spate


def spate_cmd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_version() -> None:
    out = spate_cmd("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"spate {spate.__version__}"


def test_config_prints_effective_settings_with_secrets_redacted(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('[spark]\nmaster = "spark://m:7077"\n')
    out = spate_cmd(
        "--config",
        str(toml),
        "config",
        env={"SPATE_PERSIST__CONSENSUS": "postgres://u:hunter2@db/x", "SPATE_METRICS_PORT": "9"},
    )
    assert out.returncode == 0, out.stderr
    assert 'master = "spark://m:7077"' in out.stdout
    assert "metrics_port = 9" in out.stdout
    assert "postgres://u:***@db/x" in out.stdout
    assert "hunter2" not in out.stdout + out.stderr


def test_config_shows_where_a_fresh_environment_keeps_its_data(tmp_path: Path) -> None:
    """Defaults are printed too: the embedded stores under the data directory, and the names
    of the settings that stay unset."""
    data = tmp_path / "d"
    out = spate_cmd("config", "--data-dir", str(data))
    assert out.returncode == 0, out.stderr
    assert f'blob = "file://{data}/blob"' in out.stdout
    assert f'consensus = "sqlite://{data}/consensus.db"' in out.stdout
    assert f'secrets_dir = "{data}/secrets"' in out.stdout
    unset = next(line for line in out.stdout.splitlines() if line.startswith("# unset: "))
    assert "metrics_port" in unset and "tls.cert_file" in unset


def test_an_error_is_one_line_and_a_traceback_with_debug(tmp_path: Path) -> None:
    out = spate_cmd("status", str(tmp_path / "nothing"))
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"spate: error: {tmp_path / 'nothing'} holds no spate environment (no consensus.db)"
    ]
    debug = spate_cmd("--debug", "status", str(tmp_path / "nothing"))
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr
    bad = spate_cmd("config", env={"SPATE_METRICS_PORT": "many"})
    assert bad.returncode == 1
    assert bad.stderr.startswith("spate: error: invalid setting metrics_port")
    assert len(bad.stderr.strip().splitlines()) == 1
