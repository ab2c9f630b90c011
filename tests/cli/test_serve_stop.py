"""``spate serve`` on Ctrl-C (or SIGTERM) stops the environment's replicas, unless
``--keep-replicas``, and says which it does."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import spate.cli.serve as serve_cli
from spate.cli.app import app
from spate.environment.api import Environment


class _Env:
    """An open environment with two replicas, as far as ``spate serve`` looks at it."""

    def __init__(self) -> None:
        cluster = SimpleNamespace(name="c", replicas=[object(), object()])
        self.runtime = SimpleNamespace(catalog=SimpleNamespace(clusters=[cluster]))
        self.closed: list[bool] = []

    def close(self, *, stop_replicas: bool = True) -> None:
        self.closed.append(stop_replicas)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> _Env:
    fake = _Env()
    monkeypatch.setattr(Environment, "open", staticmethod(lambda *a, **k: fake))

    async def interrupted(*args: Any) -> None:  # the server ran until Ctrl-C
        return None

    monkeypatch.setattr(serve_cli, "_serve", interrupted)
    return fake


@pytest.mark.parametrize("keep", [False, True])
def test_serve_stops_its_replicas_unless_kept_and_says_so(
    env: _Env, tmp_path: Path, keep: bool
) -> None:
    args = ["serve", str(tmp_path), "--listen", "127.0.0.1:0"]
    out = CliRunner().invoke(app, args + (["--keep-replicas"] if keep else []))
    assert out.exit_code == 0, out.output
    assert env.closed == [not keep]
    if keep:
        assert "leaving 2 replicas running (--keep-replicas)" in out.output
    else:
        assert "stopping the server and 2 replicas" in out.output
