"""Orchestrators: keep replica services running (local processes, or tasks in tests)."""

from __future__ import annotations

from spate.orchestrator.inprocess import InProcessOrchestrator
from spate.orchestrator.process import ProcessOrchestrator
from spate.orchestrator.service import (
    Orchestrator,
    Service,
    ServiceConfig,
    ServiceError,
    ServiceEvent,
    ServiceMissing,
)

__all__ = [
    "InProcessOrchestrator",
    "Orchestrator",
    "ProcessOrchestrator",
    "Service",
    "ServiceConfig",
    "ServiceError",
    "ServiceEvent",
    "ServiceMissing",
]
