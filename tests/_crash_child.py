"""A test's child process run until it is killed at a crash point (``spate.persist.crash``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from spate.persist.crash import ENV
from spate.testing.process import spate_env

REPO = Path(__file__).resolve().parents[1]


def records_until_killed(args: list[str], point: str) -> list[dict[str, object]]:
    """Run ``python -m <args>`` with crash point ``point`` armed; assert it died by SIGKILL
    there and return the JSON records it printed, one per line, before it died."""
    proc = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        env=spate_env({ENV: point}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -9, f"the child did not die at {point}: {proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines()]
