"""A compute collection whose read policy compacts it to the empty frontier is dropped: reads
of it are refused, its implied and warmup holds and its holds on its inputs go, and once every
replica reported it done its record is removed (as after ``drop_collections``)."""

from __future__ import annotations

import pytest

from spate.compute.controller import CollectionMissing
from spate.frontier import Antichain, ReadPolicy
from spate.ids import GlobalId
from spate.protocol.compute import AllowCompaction, Frontiers

from .harness import I1, R1, D, Harness, f, index_dataflow

S, IDX = GlobalId.user(1), GlobalId.user(2)


def test_an_index_compacted_to_the_empty_frontier_is_dropped_and_its_record_removed() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=11)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 10))
    h.maintain()
    h.respond(R1, Frontiers(IDX, write_frontier=f(20)))
    assert h.storage.hold_counts(S) != []  # the index holds its input
    h.controller.set_read_policy(I1, [(IDX, ReadPolicy.valid_from(Antichain.empty()))])
    h.maintain()
    assert h.replica(R1).commands[-1] == AllowCompaction(IDX, f(None))
    with pytest.raises(CollectionMissing):
        h.controller.collection_frontiers(IDX)
    assert IDX in h.inst.collections  # until the replica reports it done
    empty = f(None)
    h.respond(R1, Frontiers(IDX, write_frontier=empty, input_frontier=empty, output_frontier=empty))
    h.maintain()
    assert IDX not in h.inst.collections
    assert IDX not in h.inst.replicas[R1].collections
    assert h.storage.hold_counts(S) == []  # every hold on the input is gone
