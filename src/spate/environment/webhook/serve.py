"""Starting the webhook endpoint of an open environment (``webhook_port`` setting)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.environment.definitions import secret_value
from spate.environment.webhook.server import Endpoint, WebhookServer

if TYPE_CHECKING:
    from spate.environment.base import EnvironmentBase


def serve(env: EnvironmentBase, host: str, port: int, max_body: int) -> WebhookServer:
    """Serve the webhook sources of ``env`` (an :class:`~spate.environment.api.Environment`):
    each request reads the source's CREATE text and the secrets its CHECK names from the
    catalog as it is then. Each request to a source is counted in the runtime's
    :class:`~spate.environment.webhook.statistics.WebhookStatistics`."""

    def create_sql(name: str) -> str | None:
        state = env.runtime.catalog
        item = state.find(name)
        definition = state.definition(item.id) if item is not None else None
        return definition.create_sql if definition is not None else None

    def secret(name: str) -> str:
        rt = env.runtime
        return secret_value(rt.catalog.secrets, rt.layout.secrets(), name)

    def record(name: str, nbytes: int, accepted: bool, error: str | None) -> None:
        rt = env.runtime
        item = rt.catalog.find(name)
        if item is not None:
            rt.webhooks.record(item.id, nbytes, accepted=accepted, error=error)

    endpoint = Endpoint(
        create_sql,
        secret,
        lambda name, rows: env.insert(name, rows),  # type: ignore[attr-defined]
        record,
    )
    return WebhookServer(endpoint, host, port, max_body=max_body)
