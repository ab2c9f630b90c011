"""Fixtures of the Environment tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.environment.api import Environment


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    """A fresh Environment in ``tmp_path/data`` (no clusters), closed after the test."""
    e = Environment.open(tmp_path / "data")
    yield e
    e.close()
