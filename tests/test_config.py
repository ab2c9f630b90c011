"""Settings: defaults, TOML file, SPATE_* variables, arguments; derived values; redaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from spate.config import Settings, load_settings, redacted
from spate.environment.services import compute_replica_service, layout_of


def test_precedence_is_arguments_then_environment_then_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "spate.toml"
    toml.write_text(
        'log_level = "DEBUG"\nmetrics_port = 9000\n[spark]\nmaster = "spark://file:7077"\n'
        '[spark.conf]\n"spark.executor.memory" = "3g"\n'
    )
    assert load_settings(toml).spark.master == "spark://file:7077"
    monkeypatch.setenv("SPATE_SPARK__MASTER", "spark://env:7077")
    monkeypatch.setenv("SPATE_METRICS_PORT", "9100")
    s = load_settings(toml, metrics_port=9200)
    assert s.spark.master == "spark://env:7077"
    assert s.metrics_port == 9200
    assert s.log_level == "DEBUG"
    assert s.spark.conf == {"spark.executor.memory": "3g"}
    monkeypatch.setenv("SPATE_CONFIG", str(toml))
    assert load_settings().log_level == "DEBUG"


def test_a_missing_file_and_unknown_or_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_settings(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("metrics_prot = 9000\n")
    with pytest.raises(ValidationError, match="metrics_prot"):
        load_settings(bad)
    with pytest.raises(ValidationError, match="spark"):
        Settings(spark={"conf": {"executor.memory": "1g"}})
    with pytest.raises(ValidationError, match="HOST:PORT"):
        Settings(clusters={"c": {"replicas": {"r1": "nohost"}}})
    with pytest.raises(ValidationError, match="consensus"):
        Settings(persist={"consensus": "mysql://x/y"})
    with pytest.raises(ValidationError, match="table_tick_ms"):
        Settings(table_tick_ms=50)  # the tick goes down to 100 ms, not below
    assert Settings(table_tick_ms=100).table_tick_ms == 100


def test_cluster_spark_settings_override_the_spark_section() -> None:
    s = Settings(
        spark={"master": "local[2]", "conf": {"spark.a": "1", "spark.b": "1"}},
        clusters={"big": {"spark": {"master": "spark://m:7077", "conf": {"spark.b": "2"}}}},
    )
    big = s.spark_for("big")
    assert (big.master, big.conf) == ("spark://m:7077", {"spark.a": "1", "spark.b": "2"})
    assert s.spark_for("small") == s.spark
    assert big.session_conf()["spark.driver.host"] == "127.0.0.1"
    wild = Settings(spark={"driver_bind_address": "0.0.0.0", "driver_host": "10.1.2.3"})
    conf = wild.spark.session_conf()
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"
    assert conf["spark.driver.host"] == "10.1.2.3"


def test_the_replica_command_carries_the_settings(tmp_path: Path) -> None:
    s = Settings(
        persist={"blob": "s3://b/p?endpoint=http://127.0.0.1:9", "consensus": "postgres://u@h/d"},
        spark={"master": "spark://m:7077", "conf": {"spark.executor.cores": "1"}},
        replicas={"grace_period_s": 7.5},
        log_level="debug",
        secrets_dir=tmp_path / "sec",
    )
    layout = layout_of(tmp_path / "data", s)
    assert layout.location().blob_uri.startswith("s3://b/p")
    assert layout.secrets_dir == (tmp_path / "sec").resolve()
    svc = compute_replica_service(layout, s, cluster="c", replica="r1")
    argv = list(svc.argv)
    assert argv[argv.index("--spark-master") + 1] == "spark://m:7077"
    assert argv[argv.index("--grace-period") + 1] == "7.5"
    assert argv[argv.index("--consensus-uri") + 1] == "postgres://u@h/d"
    assert "spark.executor.cores=1" in argv
    assert svc.env["SPATE_LOG_LEVEL"] == "DEBUG"
    embedded = layout_of(tmp_path / "data", Settings())
    assert embedded.persist is None
    assert embedded.location().consensus_uri.endswith("consensus.db")


def test_secrets_are_redacted_and_kept_out_of_repr() -> None:
    s = Settings(
        persist={"consensus": "postgres://spate:hunter2@db/x"},
        spark={"conf": {"spark.hadoop.fs.s3a.secret.key": "hunter2", "spark.a": "1"}},
    )
    assert "hunter2" not in repr(s)
    out = redacted(s)
    assert "hunter2" not in str(out)
    assert out["persist"]["consensus"] == "postgres://spate:***@db/x"
    assert out["spark"]["conf"] == {"spark.hadoop.fs.s3a.secret.key": "***", "spark.a": "1"}
