"""DataflowDescription.validate(): how the parts refer to each other, checked before building."""

from __future__ import annotations

import dataclasses

import pytest

from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.plan import InvalidDataflow, col, max_
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.relation import Get
from spate.repr import INT64, TEXT, RelationDesc
from tests.plan.fixtures import AUCTIONS, AUCTIONS_DESC, AUCTIONS_ID, BIDS, BIDS_DESC, BIDS_ID

U10, U11, U12, U13 = (GlobalId.user(i) for i in range(10, 14))
T1 = GlobalId.transient(1)

MAX_BID = BIDS.reduce(["auction"], top=max_(col("price")))
WINNERS = Get(U10, MAX_BID.desc).join(AUCTIONS, on=[("auction", "id")])


def good() -> DataflowDescription:
    return DataflowDescription(
        source_imports=(SourceImport(BIDS_ID, BIDS_DESC),),
        index_imports=(IndexImport(U13, IndexDesc(AUCTIONS_ID, (0,)), AUCTIONS_DESC),),
        objects_to_build=(BuildDesc(U10, MAX_BID), BuildDesc(U11, WINNERS)),
        index_exports=(IndexExport(U12, IndexDesc(U11, (0,)), WINNERS.desc),),
        sink_exports=(
            SinkExport(T1, U11, WINNERS.desc, SubscribeConnection()),
            SinkExport(U11, U11, WINNERS.desc, MaterializedViewConnection()),
        ),
        as_of=Antichain.of(0),
    )


def reason(df: DataflowDescription) -> str:
    with pytest.raises(InvalidDataflow) as e:
        df.validate()
    assert str(e.value) == f"invalid dataflow: {e.value.reason}"
    return e.value.reason


def test_good_dataflow_validates() -> None:
    good().validate()


def test_non_topological_objects() -> None:
    df = good()
    df = dataclasses.replace(df, objects_to_build=tuple(reversed(df.objects_to_build)))
    assert reason(df) == (
        "objects_to_build is not in topological order: u11 reads u10, which is built after it"
    )


def test_unknown_input() -> None:
    df = dataclasses.replace(good(), source_imports=())
    assert reason(df) == "object u10 reads u1, which is neither imported nor built"


def test_duplicate_exports() -> None:
    df = good()
    dup = dataclasses.replace(df.sink_exports[0], id=U12)
    df = dataclasses.replace(df, sink_exports=(dup,))
    assert reason(df) == "export id u12 is used twice"
    df = dataclasses.replace(
        good(), index_exports=(IndexExport(BIDS_ID, IndexDesc(U11, (0,)), WINNERS.desc),)
    )
    assert reason(df) == "export id u1 is also an import"


def test_objects_built_twice_or_also_imported() -> None:
    df = good()
    df = dataclasses.replace(df, objects_to_build=(*df.objects_to_build, df.objects_to_build[0]))
    assert reason(df) == "object u10 is built twice"
    df = dataclasses.replace(good(), objects_to_build=(BuildDesc(BIDS_ID, BIDS),))
    assert reason(df) == "object u1 is both imported and built"


def test_get_must_agree_with_what_it_reads() -> None:
    wrong = RelationDesc.of(("auction", INT64, False), ("top", TEXT, False))
    df = good()
    plan = Get(U10, wrong).join(AUCTIONS, on=[("auction", "id")])
    df = dataclasses.replace(
        df,
        objects_to_build=(df.objects_to_build[0], BuildDesc(U11, plan)),
        index_exports=(),
        sink_exports=(),
    )
    assert (
        reason(df)
        == "object u11 reads u10 with column 1 ('top') as text but it is int64 (in object u10)"
    )
    nullable = RelationDesc.of(("auction", INT64, True), ("top", INT64, True))
    df2 = dataclasses.replace(
        df, objects_to_build=(df.objects_to_build[0], BuildDesc(U11, Get(U10, nullable)))
    )
    df2.validate()  # calling a non-null column nullable is fine
    nonnull = BIDS_DESC.project(["auction", "bidder", "price"])
    df3 = dataclasses.replace(
        good(), source_imports=(SourceImport(BIDS_ID, nonnull),), index_exports=(), sink_exports=()
    )
    assert reason(df3) == (
        "object u10 reads u1 with 5 columns (auction, bidder, price, channel, date_time) but it "
        "has 3 (in source import u1)"
    )


def test_index_keys_within_arity() -> None:
    df = dataclasses.replace(
        good(), index_exports=(IndexExport(U12, IndexDesc(U11, (0, 12)), WINNERS.desc),)
    )
    assert reason(df).startswith("index export u12 on u11: key column 12 is outside the 8 columns")
    df = dataclasses.replace(
        good(), index_imports=(IndexImport(U13, IndexDesc(AUCTIONS_ID, (6,)), AUCTIONS_DESC),)
    )
    assert reason(df).startswith("index import u13 on u2: key column 6 is outside the 6 columns")


def test_exports_must_read_existing_collections_with_matching_descs() -> None:
    df = dataclasses.replace(
        good(), index_exports=(IndexExport(U12, IndexDesc(U13, (0,)), WINNERS.desc),)
    )
    assert reason(df) == "index export u12 is on u13, which is neither imported nor built"
    sink = SinkExport(T1, U10, WINNERS.desc, SubscribeConnection())
    df = dataclasses.replace(good(), sink_exports=(sink,))
    assert reason(df) == (
        "sink export t1 describes u10 with 8 columns (auction, top, id, item, seller, category, "
        "reserve, expires) but it has 2"
    )
