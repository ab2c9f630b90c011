"""Clusters and replicas: catalog entries, compute instances, and replica processes.

A cluster is a compute instance; each of its replicas is a ``spate replica --role compute``
process started by the orchestrator (service ``<cluster>-<replica>``), or placed elsewhere (a
``HOST:PORT`` where someone else started it, see :mod:`.placement`), and connected to by the
compute controller, which replays the instance's history to it and reconnects (rehydrating)
whenever the connection breaks. Sources and sinks run on one storage instance with one storage
replica (service ``storage-r0``), started when the first source or sink needs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from spate.compute.controller.replica import ReplicaConfig, ReplicaLocation
from spate.environment import placement
from spate.environment.catalog import CatalogState, ClusterItem, ReplicaItem
from spate.environment.runtime import STORAGE_INSTANCE, STORAGE_REPLICA, Runtime
from spate.environment.services import (
    compute_replica_service,
    placed_auth,
    storage_replica_service,
)
from spate.errors import InvalidArgumentValue as InvalidArgumentValue
from spate.errors import check_argument
from spate.storage.controller.replica_client import StorageReplicaLocation


def service_name(cluster: str, replica: str) -> str:
    return f"{cluster}-{replica}"


def replica_address(rt: Runtime, cluster: str, replica: str) -> str | None:
    """Where ``cluster``'s ``replica`` was placed (settings first), or ``None``: local."""
    configured = rt.settings.placement(cluster).get(replica)
    return configured or placement.load(rt.persist.consensus).address(cluster, replica)


async def start_compute_replica(rt: Runtime, cluster: ClusterItem, replica: ReplicaItem) -> None:
    address = await asyncio.to_thread(replica_address, rt, cluster.name, replica.name)
    config = compute_replica_service(
        rt.layout, rt.settings, cluster=cluster.name, replica=str(replica.id), address=address
    )
    service = await rt.orchestrator.ensure_service(service_name(cluster.name, replica.name), config)
    host, port = service.address()
    auth = None if address is None else placed_auth(rt.layout, rt.settings)
    rt.compute.add_replica_to_instance(
        cluster.instance, replica.id, ReplicaConfig(ReplicaLocation(host, port, auth=auth))
    )


async def ensure_storage_replica(rt: Runtime) -> None:
    """Start the storage replica (once) and connect the storage controller to it."""
    if rt.storage_replica_started:
        return
    service = await rt.orchestrator.ensure_service(
        "storage-r0", storage_replica_service(rt.layout, rt.settings, str(STORAGE_REPLICA))
    )
    host, port = service.address()
    auth = None if rt.settings.replicas.storage is None else placed_auth(rt.layout, rt.settings)
    location = (
        StorageReplicaLocation(host, port, rt.layout.secret())
        if auth is None
        else StorageReplicaLocation(host, port, auth.secret, tls=auth.tls)
    )
    rt.storage.connect_replica(STORAGE_INSTANCE, STORAGE_REPLICA, location)
    rt.storage_replica_started = True


async def create_cluster(
    rt: Runtime, name: str, replicas: Sequence[str], addresses: Mapping[str, str] | None = None
) -> ClusterItem:
    """A cluster with ``replicas``; those named in ``addresses`` are placed there."""
    addresses = dict(addresses or {})

    def change(state: CatalogState) -> CatalogState:
        state, _ = state.add_cluster(name)
        for r in replicas:
            state, _ = state.add_replica(name, r)
        return state

    change(rt.catalog)  # validate before anything is durable
    await _place(rt, name, {r: addresses.get(r) for r in replicas})  # local ones: cleared
    rt.commit(change)
    cluster = rt.catalog.cluster(name)
    rt.compute.create_instance(cluster.instance)
    for replica in cluster.replicas:
        await start_compute_replica(rt, cluster, replica)
    return cluster


async def cluster_for(rt: Runtime, cluster: str | None) -> str:
    """``cluster``, or the one work that names none runs on (:meth:`Runtime.default_cluster`);
    when no cluster exists, the settings' ``default_cluster`` (``quickstart``), created now
    with its replicas (also when named while it does not exist): a fresh environment needs
    no setup, and one that never needs a cluster starts no replica."""
    name = rt.settings.default_cluster
    exists = [c.name for c in rt.catalog.clusters]
    if name and (cluster == name or (cluster is None and not exists)) and name not in exists:
        await create_cluster(rt, name, replica_names(rt.settings.default_cluster_replicas))
        return name
    return rt.default_cluster(cluster)


def cluster_names(rt: Runtime) -> list[str]:
    """The clusters, and the default one while no cluster exists (it is created on first
    need: :func:`cluster_for`)."""
    names = [c.name for c in rt.catalog.clusters]
    default = rt.settings.default_cluster
    return names if names or not default else [default]


async def _place(rt: Runtime, cluster: str, addresses: Mapping[str, str | None]) -> None:
    """Record (or clear: ``None``) where ``cluster``'s replicas are placed, before the catalog
    names them: a replica the catalog names is then never started in the wrong place."""
    doc = placement.document(rt.persist.consensus)

    def change(current: placement.Placement | None) -> placement.Placement:
        p = current or placement.Placement()
        for replica, address in addresses.items():
            p = p.with_address(cluster, replica, address)
        return p

    for address in addresses.values():  # validate first
        if address is not None:
            placement.split_address(address)
    current = await asyncio.to_thread(placement.load, rt.persist.consensus)
    if change(current) != current:
        await asyncio.to_thread(doc.update, change)


async def add_replica(
    rt: Runtime, cluster_name: str, name: str, address: str | None = None
) -> ReplicaItem:
    if address is not None:
        check_argument(address, str, f"the address of replica {name!r} (HOST:PORT)")
    rt.catalog.add_replica(cluster_name, name)  # validate before anything is durable
    await _place(rt, cluster_name, {name: address})
    rt.commit(lambda s: s.add_replica(cluster_name, name)[0])
    cluster = rt.catalog.cluster(cluster_name)
    replica = cluster.replica(name)
    await start_compute_replica(rt, cluster, replica)
    return replica


async def drop_replica(rt: Runtime, cluster_name: str, name: str) -> None:
    cluster = rt.catalog.cluster(cluster_name)
    replica = cluster.replica(name)
    rt.commit(lambda s: s.remove_replica(cluster_name, name))
    rt.compute.drop_replica(cluster.instance, replica.id)
    await rt.orchestrator.drop_service(service_name(cluster_name, name))
    await _place(rt, cluster_name, {name: None})


async def drop_cluster(rt: Runtime, name: str) -> None:
    cluster = rt.catalog.cluster(name)
    rt.commit(lambda s: s.remove_cluster(name))
    for replica in cluster.replicas:
        rt.compute.drop_replica(cluster.instance, replica.id)
        await rt.orchestrator.drop_service(service_name(name, replica.name))
    rt.compute.drop_instance(cluster.instance)
    await _place(rt, name, {r.name: None for r in cluster.replicas})


async def restore_clusters(rt: Runtime) -> None:
    """At open: instances and replica processes for every cluster in the catalog."""
    for cluster in rt.catalog.clusters:
        rt.compute.create_instance(cluster.instance)
        for replica in cluster.replicas:
            await start_compute_replica(rt, cluster, replica)


def replica_names(count_or_names: int | Sequence[str] | Mapping[str, str]) -> list[str]:
    """``r1..rN`` for a count ``N >= 0``, or the names given (the keys of a placement)."""
    check_argument(
        count_or_names, (int, list, tuple, dict), "replicas (a count, names or addresses)"
    )
    if isinstance(count_or_names, Mapping):
        for a in count_or_names.values():
            check_argument(a, str, "a replica address (HOST:PORT)")
        count_or_names = list(count_or_names)
    if isinstance(count_or_names, int):
        if count_or_names < 0:
            raise InvalidArgumentValue(
                f"replicas must be a count >= 0 or a list of names, got {count_or_names}"
            )
        return [f"r{i}" for i in range(1, count_or_names + 1)]
    names = list(count_or_names)
    for n in names:
        check_argument(n, str, "a replica name")
    return names
