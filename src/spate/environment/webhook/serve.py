"""Starting the webhook endpoint of an open environment (``webhook_port`` setting)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.environment.webhook.server import Endpoint, WebhookServer

if TYPE_CHECKING:
    from spate.environment.base import EnvironmentBase


def serve(env: EnvironmentBase, host: str, port: int, max_body: int) -> WebhookServer:
    """Serve the webhook sources of ``env`` (an :class:`~spate.environment.api.Environment`)."""
    _, definitions = env._sql_state()  # type: ignore[attr-defined]
    endpoint = Endpoint(
        definitions.items.get,
        definitions.secret_value,
        lambda name, rows: env.insert(name, rows),  # type: ignore[attr-defined]
    )
    return WebhookServer(endpoint, host, port, max_body=max_body)
