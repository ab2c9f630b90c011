"""`spate demo` at this stage: the worked example of frontiers, policies and holds."""

from __future__ import annotations

import itertools
import subprocess

from rich.console import Console

from spate.environment.walkthrough import run_demo
from spate.frontier import Antichain
from spate.testing.process import spate_argv, spate_env


def test_demo_steps_keep_since_at_the_minimum_hold() -> None:
    steps = run_demo(Console(file=open("/dev/null", "w")))  # noqa: SIM115
    sinces = [s.since for s in steps]
    assert sinces[1] == Antichain.of(25)  # lag 10, granularity 5: 37 - 10 = 27 -> 25
    assert sinces[-1] == Antichain.empty()
    # since never regresses
    for a, b in itertools.pairwise(sinces):
        assert a.less_equal(b)


def test_spate_walkthrough_command_runs() -> None:
    out = subprocess.run(
        spate_argv("walkthrough"), capture_output=True, text=True, timeout=120, env=spate_env()
    )
    assert out.returncode == 0, out.stderr
    assert "since == min(read holds) held at every step." in out.stdout
