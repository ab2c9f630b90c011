"""Protocol stages on the replica side: a pure checker per connection.

A replica creates one :class:`ReplicaStages` per connection and calls :meth:`~ReplicaStages.
observe` on every command *before* acting on it. A command out of its stage raises
:class:`StageViolation` (a ``ProtocolError`` whose message starts with ``stage:``); the replica
MUST then close the connection without executing it.

=================  =====================================================================
stage              allowed commands
=================  =====================================================================
CREATION           compute: ``Hello`` then ``CreateInstance``; storage: ``Hello``
INITIALIZATION     the replayed history (every computation command below), then
                   ``InitializationComplete``
COMPUTATION        compute: ``CreateDataflow``, ``Schedule``, ``AllowCompaction``, ``Peek``,
                   ``CancelPeek``, ``UpdateConfiguration``, ``AllowWrites``;
                   storage: ``RunIngestion``, ``RunSink``, ``AllowCompaction``,
                   ``UpdateConfiguration``, ``AllowWrites``
READ_WRITE         as COMPUTATION, after the first ``AllowWrites`` (compute: per collection,
                   see :meth:`~ReplicaStages.writes_allowed`)
=================  =====================================================================

``Hello`` must carry this protocol's version and (when the connection's epoch is known) the
connection's epoch. A second ``Hello``, ``CreateInstance`` or ``InitializationComplete`` is a
violation. ``AllowWrites`` may also arrive during initialization; it takes effect (the stage
becomes READ_WRITE) when initialization completes.
"""

from __future__ import annotations

import enum
from typing import Final

from spate.errors import ProtocolError
from spate.ids import GlobalId
from spate.protocol import compute, storage
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.handshake import Role


class Stage(enum.Enum):
    CREATION = "creation"
    INITIALIZATION = "initialization"
    COMPUTATION = "computation"
    READ_WRITE = "read-write"


class StageViolation(ProtocolError):
    """A command arrived outside the stage that allows it. The connection must close."""


_COMPUTE_WORK: Final[tuple[type, ...]] = (
    compute.CreateDataflow,
    compute.Schedule,
    compute.AllowCompaction,
    compute.Peek,
    compute.CancelPeek,
    compute.UpdateConfiguration,
    compute.AllowWrites,
)
_STORAGE_WORK: Final[tuple[type, ...]] = (
    storage.RunIngestion,
    storage.RunSink,
    storage.AllowCompaction,
    storage.UpdateConfiguration,
    storage.AllowWrites,
)


class ReplicaStages:
    """The stage of one replica connection (pure: no I/O, no clock)."""

    __slots__ = ("_epoch", "_hello", "_role", "_stage", "_writes", "_writes_pending")

    def __init__(self, role: Role, *, epoch: int | None = None) -> None:
        self._role: Role = role
        self._epoch = epoch
        self._stage = Stage.CREATION
        self._hello = False
        self._writes: set[GlobalId] = set()
        self._writes_pending = False

    @property
    def stage(self) -> Stage:
        return self._stage

    @property
    def read_only(self) -> bool:
        """True until the first ``AllowWrites`` took effect."""
        return self._stage is not Stage.READ_WRITE

    def writes_allowed(self, id: GlobalId | None = None) -> bool:
        """Storage: whether the replica may write. Compute: whether collection ``id`` may."""
        if self._stage is not Stage.READ_WRITE:
            return False
        return self._role == "storage" or id in self._writes

    def _fail(self, command: object, expected: str) -> StageViolation:
        return StageViolation(
            f"stage: {type(command).__name__} is not allowed in the {self._stage.value} "
            f"stage of a {self._role} replica ({expected})"
        )

    def observe(self, command: object) -> None:
        """Check ``command`` against the stage and advance it; raise ``StageViolation``."""
        if self._stage is Stage.CREATION:
            self._creation(command)
            return
        work = _COMPUTE_WORK if self._role == "compute" else _STORAGE_WORK
        done = (
            compute.InitializationComplete
            if self._role == "compute"
            else storage.InitializationComplete
        )
        if isinstance(command, done):
            if self._stage is not Stage.INITIALIZATION:
                raise self._fail(command, "initialization already completed")
            self._stage = Stage.READ_WRITE if self._writes_pending else Stage.COMPUTATION
            return
        if not isinstance(command, work):
            raise self._fail(command, "expected a computation command")
        if isinstance(command, (compute.AllowWrites, storage.AllowWrites)):
            if isinstance(command, compute.AllowWrites):
                self._writes.add(command.id)
            if self._stage is Stage.INITIALIZATION:
                self._writes_pending = True
            else:
                self._stage = Stage.READ_WRITE

    def _creation(self, command: object) -> None:
        if not self._hello:
            if not isinstance(command, Hello):
                raise self._fail(command, "expected Hello first")
            if command.version != PROTOCOL_VERSION:
                raise StageViolation(
                    f"stage: Hello with protocol version {command.version}; this replica "
                    f"speaks {PROTOCOL_VERSION}"
                )
            if self._epoch is not None and command.epoch != self._epoch:
                raise StageViolation(
                    f"stage: Hello for epoch {command.epoch} on a connection "
                    f"authenticated for epoch {self._epoch}"
                )
            self._hello = True
            if self._role == "storage":
                self._stage = Stage.INITIALIZATION
            return
        if not isinstance(command, compute.CreateInstance):
            raise self._fail(command, "expected CreateInstance after Hello")
        self._stage = Stage.INITIALIZATION
