"""Writing benchmark results to ``bench/results/<name>.json`` (committed with the code)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=RESULTS.parent,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def write_result(name: str, figures: dict[str, Any]) -> Path:
    """Record ``figures`` with the machine, the commit and the date."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": name,
        "date": time.strftime("%Y-%m-%d"),
        "commit": _commit(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "figures": figures,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {path.relative_to(RESULTS.parent.parent)}")
    return path
