"""``spate persist inspect`` / ``shards`` on a real data directory."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from spate.cli import app
from spate.ids import ShardId
from spate.persist import PersistClient
from tests.persist.conftest import DESC, A, tok, updates


def test_inspect_prints_frontiers_batches_readers_and_writers(
    client: PersistClient, shard: ShardId, tmp_path: Path
) -> None:
    w = client.open_writer(shard, DESC)
    w.compare_and_append(
        updates([((1, "a"), 0, 1), ((2, "b"), 1, 1)]),
        expected_upper=A(0),
        new_upper=A(2),
        idempotency_token=tok(),
    )
    r = client.open_leased_reader(shard, DESC)
    r.downgrade_since(A(1))
    client.open_critical_since(shard, epoch=3)
    runner = CliRunner()
    data = str(tmp_path / "data")
    out = runner.invoke(app, ["persist", "inspect", data, str(shard)])
    assert out.exit_code == 0, out.output
    text = out.output
    assert f"shard    {shard}" in text
    assert "since    {1}" in text and "upper    {2}" in text
    assert "2 updates" in text and str(w.writer_id) in text and str(r.reader_id) in text
    assert "opaque 3" in text
    js = json.loads(runner.invoke(app, ["persist", "inspect", data, str(shard), "--json"]).output)
    assert js["upper"] == [2] and js["since"] == [1] and len(js["batches"]) == 1
    assert list(js["critical_readers"].values()) == [{"since": [1], "opaque": 3}]
    listed = runner.invoke(app, ["persist", "shards", data])
    assert listed.output.split() == [str(shard)]


def test_inspect_errors_clearly_and_creates_nothing(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = tmp_path / "nothing"
    out = runner.invoke(
        app, ["persist", "inspect", str(missing), "s00000000-0000-0000-0000-000000000000"]
    )
    assert out.exit_code != 0 and "no persist data" in out.output
    assert not missing.exists()
    out = runner.invoke(app, ["persist", "inspect", str(tmp_path), "not-a-shard"])
    assert out.exit_code != 0 and "not a ShardId" in out.output
