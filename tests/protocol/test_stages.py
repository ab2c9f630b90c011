"""Replica-side protocol stages: out-of-stage commands are ProtocolErrors."""

from __future__ import annotations

import pytest

from spate.errors import ProtocolError
from spate.frontier import Antichain
from spate.ids import GlobalId, SeededIdGen
from spate.protocol import compute, storage
from spate.protocol.common import Hello
from spate.protocol.compute import CreateInstance, InstanceConfig
from spate.protocol.stages import ReplicaStages, Stage, StageViolation
from tests.protocol.compute_model import dataflow, peek

U1 = GlobalId.user(1)
HELLO = Hello(version=1, epoch=4, nonce=b"n")


def test_compute_stages_in_order() -> None:
    s = ReplicaStages("compute", epoch=4)
    assert s.stage is Stage.CREATION and s.read_only
    s.observe(HELLO)
    assert s.stage is Stage.CREATION
    s.observe(CreateInstance(InstanceConfig()))
    assert s.stage is Stage.INITIALIZATION
    s.observe(compute.CreateDataflow(dataflow([U1], 5)))
    s.observe(compute.AllowWrites(U1))
    assert s.read_only  # takes effect when initialization completes
    s.observe(compute.InitializationComplete())
    assert s.stage is Stage.READ_WRITE
    assert s.writes_allowed(U1) and not s.writes_allowed(GlobalId.user(2))
    s.observe(peek(U1, 5, SeededIdGen(0)))


def test_compute_read_only_until_allow_writes() -> None:
    s = ReplicaStages("compute")
    for c in (HELLO, CreateInstance(InstanceConfig()), compute.InitializationComplete()):
        s.observe(c)
    assert s.stage is Stage.COMPUTATION and s.read_only and not s.writes_allowed(U1)
    s.observe(compute.AllowWrites(U1))
    assert s.stage is Stage.READ_WRITE and s.writes_allowed(U1)


@pytest.mark.parametrize(
    ("prefix", "command", "message"),
    [
        ([], peek(U1, 5, SeededIdGen(1)), "Peek is not allowed in the creation stage"),
        ([], CreateInstance(InstanceConfig()), "expected Hello first"),
        ([HELLO], HELLO, "expected CreateInstance after Hello"),
        ([HELLO], compute.Schedule(U1), "expected CreateInstance after Hello"),
        ([HELLO, CreateInstance(InstanceConfig())], HELLO, "initialization stage"),
        (
            [HELLO, CreateInstance(InstanceConfig())],
            CreateInstance(InstanceConfig()),
            "expected a computation command",
        ),
        (
            [HELLO, CreateInstance(InstanceConfig()), compute.InitializationComplete()],
            compute.InitializationComplete(),
            "initialization already completed",
        ),
        (
            [HELLO, CreateInstance(InstanceConfig())],
            storage.RunSink.__new__(storage.RunSink),
            "RunSink is not allowed",
        ),
        ([], Hello(version=2, epoch=4, nonce=b""), "protocol version 2"),
        (
            [],
            Hello(version=1, epoch=3, nonce=b""),
            "epoch 3 on a connection authenticated for epoch 4",
        ),
    ],
)
def test_compute_stage_violations(prefix: list[object], command: object, message: str) -> None:
    s = ReplicaStages("compute", epoch=4)
    for c in prefix:
        s.observe(c)
    before = s.stage
    with pytest.raises(StageViolation, match=message) as e:
        s.observe(command)
    assert isinstance(e.value, ProtocolError) and str(e.value).startswith("stage:")
    assert s.stage is before  # a refused command changes nothing


def test_storage_stages() -> None:
    s = ReplicaStages("storage", epoch=4)
    with pytest.raises(StageViolation, match="expected Hello first"):
        s.observe(storage.AllowCompaction(U1, Antichain.empty()))
    s.observe(HELLO)
    assert s.stage is Stage.INITIALIZATION
    s.observe(storage.AllowCompaction(U1, Antichain.of(3)))
    with pytest.raises(StageViolation, match="CreateInstance is not allowed"):
        s.observe(CreateInstance(InstanceConfig()))
    with pytest.raises(StageViolation, match="InitializationComplete is not allowed"):
        s.observe(compute.InitializationComplete())
    s.observe(storage.InitializationComplete())
    assert s.stage is Stage.COMPUTATION and not s.writes_allowed()
    s.observe(storage.AllowWrites())
    assert s.stage is Stage.READ_WRITE and s.writes_allowed()
    with pytest.raises(StageViolation, match="not allowed"):
        s.observe(HELLO)
