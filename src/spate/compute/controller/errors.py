"""Errors of the compute controller (defined in :mod:`spate.errors`, re-exported here).

Every public method of :class:`~spate.compute.controller.ComputeController` validates its whole
input before it changes anything, and raises one of the narrow errors below; a call that raised
changed nothing. Messages name the instance, replica or collection and the frontiers involved,
and start with what went wrong ("collection does not exist: u42").

=============================  ===========================================================
raised by                      errors
=============================  ===========================================================
``create_instance``            ``InstanceExists``
``drop_instance``              ``InstanceMissing``, ``InstanceNotEmpty``
``add_replica_to_instance``    ``InstanceMissing``, ``ReplicaExists``
``drop_replica``               ``InstanceMissing``, ``ReplicaMissing``
``create_dataflow``            ``InstanceMissing``, ``ReplicaMissing``, ``MissingAsOf``,
                               ``EmptyAsOfForSubscribe``, ``CollectionMissing``,
                               ``DataflowSinceViolation``, ``InvalidDataflow``
``drop_collections``           ``InstanceMissing``, ``CollectionMissing``
``peek``                       ``InstanceMissing``, ``ReplicaMissing``, ``CollectionMissing``,
                               ``PeekSinceViolation``, ``PeekTargetInvalid``, ``PeekExists``
``set_read_policy``            ``InstanceMissing``, ``CollectionMissing``,
                               ``WriteOnlyCollection``
``acquire_read_hold``          ``InstanceMissing``, ``CollectionMissing``
``collection_frontiers`` …     ``InstanceMissing``, ``CollectionMissing``
``collections_hydrated_for…``  ``InstanceMissing``, ``HydrationCheckBadTarget``
any call after ``shutdown``    ``InstanceShutDown``
=============================  ===========================================================
"""

from __future__ import annotations

from typing import Final

from spate.errors import (
    CollectionMissing as CollectionMissing,
)
from spate.errors import ControllerError as ComputeControllerError
from spate.errors import (
    DataflowSinceViolation as DataflowSinceViolation,
)
from spate.errors import (
    EmptyAsOfForSubscribe as EmptyAsOfForSubscribe,
)
from spate.errors import (
    HydrationCheckBadTarget as HydrationCheckBadTarget,
)
from spate.errors import (
    InstanceExists as InstanceExists,
)
from spate.errors import (
    InstanceMissing as InstanceMissing,
)
from spate.errors import (
    InstanceNotEmpty as InstanceNotEmpty,
)
from spate.errors import (
    InstanceShutDown as InstanceShutDown,
)
from spate.errors import (
    InvalidDataflow as InvalidDataflow,
)
from spate.errors import (
    InvalidPeek as InvalidPeek,
)
from spate.errors import (
    MissingAsOf as MissingAsOf,
)
from spate.errors import (
    PeekExists as PeekExists,
)
from spate.errors import (
    PeekSinceViolation as PeekSinceViolation,
)
from spate.errors import (
    PeekTargetInvalid as PeekTargetInvalid,
)
from spate.errors import (
    ReplicaExists as ReplicaExists,
)
from spate.errors import (
    ReplicaMissing as ReplicaMissing,
)
from spate.errors import (
    SinceViolation as SinceViolation,
)
from spate.errors import (
    WriteOnlyCollection as WriteOnlyCollection,
)

__all__ = ["ERROR_TARGET_REPLICA_FAILED", "ComputeControllerError"]

ERROR_TARGET_REPLICA_FAILED: Final = "target replica failed or was dropped"
"""The error a targeted peek or subscribe gets when its replica fails or is dropped."""
