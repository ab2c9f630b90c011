"""Where replicas placed elsewhere listen, durable beside the catalog.

A cluster's replica is either a local process the orchestrator starts, or *placed*: started by
someone else (``spate replica --role compute --listen HOST:PORT`` on another host) at an
address given to ``create_cluster(replicas={"r1": "host:port"})`` or ``add_replica(...,
address=)``. The addresses live in consensus key ``environment/placement`` so that a reopened
environment connects to the same replicas; the settings' ``clusters.<name>.replicas`` override
them (an operator moves a replica by configuration).
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.environment.durable import DurableDocument
from spate.orchestrator.service import split_address as split_address
from spate.persist.location import Consensus
from spate.wire import wire

KEY = "environment/placement"


@wire("environment.placement")
@dataclass(frozen=True, slots=True)
class Placement:
    """``(cluster, replica, HOST:PORT)`` of every replica placed elsewhere."""

    addresses: tuple[tuple[str, str, str], ...] = ()

    def address(self, cluster: str, replica: str) -> str | None:
        for c, r, a in self.addresses:
            if (c, r) == (cluster, replica):
                return a
        return None

    def with_address(self, cluster: str, replica: str, address: str | None) -> Placement:
        """This placement with ``cluster``'s ``replica`` at ``address`` (``None``: local)."""
        if address is not None:
            split_address(address)
        kept = tuple(x for x in self.addresses if (x[0], x[1]) != (cluster, replica))
        return Placement(kept if address is None else (*kept, (cluster, replica, address)))


def document(consensus: Consensus) -> DurableDocument[Placement]:
    return DurableDocument(consensus, KEY, Placement)


def load(consensus: Consensus) -> Placement:
    return document(consensus).load() or Placement()
