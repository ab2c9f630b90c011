"""Fixtures for protocol tests: a shared secret, a raw authenticated client."""

from __future__ import annotations

import secrets

import pytest


@pytest.fixture
def secret() -> bytes:
    return secrets.token_bytes(32)
