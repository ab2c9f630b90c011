"""Counts of what each webhook source was sent, for its row of ``source_statistics``.

A webhook source has no ingestion on a storage replica: the environment's endpoint writes its
rows itself, so the endpoint counts them. Per source (by id, so a source dropped and created
again under its name starts from zero): the requests *received* (every POST that named the
source, answered or refused), those *accepted* (written: answered ``200``), those *rejected*
(a failed CHECK, a body that does not decode, a body over the size limit, a failed write), the
bytes of the bodies received and accepted, and why the latest rejection happened.

The counts live in the environment process and start from zero when it opens, as a storage
replica's counts of its sources do when it starts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from spate.ids import GlobalId


@dataclass(frozen=True, slots=True)
class WebhookCounts:
    received: int = 0
    accepted: int = 0
    rejected: int = 0
    bytes_received: int = 0
    bytes_accepted: int = 0
    last_error: str | None = None


class WebhookStatistics:
    """The counts of every webhook source (thread-safe: requests are served in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[GlobalId, WebhookCounts] = {}

    def record(self, id: GlobalId, nbytes: int, *, accepted: bool, error: str | None) -> None:
        """One request to source ``id`` with a body of ``nbytes``, accepted or rejected (with
        ``error``)."""
        with self._lock:
            c = self._counts.get(id, WebhookCounts())
            self._counts[id] = replace(
                c,
                received=c.received + 1,
                accepted=c.accepted + accepted,
                rejected=c.rejected + (not accepted),
                bytes_received=c.bytes_received + nbytes,
                bytes_accepted=c.bytes_accepted + (nbytes if accepted else 0),
                last_error=c.last_error if accepted else error,
            )

    def of(self, id: GlobalId) -> WebhookCounts:
        with self._lock:
            return self._counts.get(id, WebhookCounts())
