"""Counting the rows the server encodes (``RowEncoder.row``), to tell an answer encoded
anew from one sent as it was encoded before."""

from __future__ import annotations

from typing import Any

import pytest

import spate.pgwire.output


def encoded_rows(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The rows every ``RowEncoder.row`` call encodes from now on (the test clears it)."""
    encoded: list[object] = []
    real = spate.pgwire.output.RowEncoder.row

    def row(self: Any, values: Any) -> bytes:
        encoded.append(values)
        return real(self, values)

    monkeypatch.setattr(spate.pgwire.output.RowEncoder, "row", row)
    return encoded
