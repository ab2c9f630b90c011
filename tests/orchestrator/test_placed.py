"""Services placed elsewhere: registered at their address, never run or stopped here."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.orchestrator.process import ProcessOrchestrator
from spate.orchestrator.service import ServiceConfig, ServiceError


async def test_a_placed_service_is_registered_not_run(tmp_path: Path) -> None:
    orch = ProcessOrchestrator(tmp_path)
    events = orch.watch_services()
    config = ServiceConfig(argv=("/nonexistent/binary", "--listen", "10.9.8.7:6875"),
                           address="10.9.8.7:6875")  # fmt: skip
    service = await orch.ensure_service("c-r1", config)
    assert service.address() == ("10.9.8.7", 6875)
    assert orch.placed("c-r1") == "10.9.8.7:6875"
    assert orch.pid("c-r1") is None
    event = await anext(events)
    assert (event.status, event.reason) == ("online", "placed at 10.9.8.7:6875")
    assert not (tmp_path / "services").exists()
    assert await orch.ensure_service("c-r1", config) == service  # idempotent
    await orch.drop_service("c-r1")
    assert orch.list_services() == []
    await orch.close()


def test_a_malformed_address_is_refused() -> None:
    for bad in ("nohost", "h:0", "h:99999", ":80"):
        with pytest.raises(ServiceError, match="HOST:PORT"):
            ServiceConfig(argv=("x",), address=bad)
