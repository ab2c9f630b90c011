"""pgoutput decoding and transaction assembly, on hand-built messages (no server)."""

from __future__ import annotations

import struct

import pytest

from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT
from spate.storage.sources.postgres import pgoutput as pg
from spate.storage.sources.postgres.changes import ChangeDecoder, decode_transactions, updates_of
from spate.storage.sources.postgres.config import PostgresTable
from spate.storage.sources.postgres.types import INT8_OID, TEXT_OID
from spate.storage.sources.source import SourceError

TABLE = PostgresTable(
    "public", "t", RelationDesc.of(("id", INT64, False), ("v", TEXT)), (INT8_OID, TEXT_OID)
)


def s(text: str) -> bytes:
    return text.encode() + b"\x00"


def tup(*values: bytes | str | None) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v == "u":
            out += b"u"
        else:
            assert isinstance(v, bytes)
            out += b"t" + struct.pack(">i", len(v)) + v
    return out


def relation(oid: int = 7, *, identity: bytes = b"f", cols=(("id", INT8_OID), ("v", TEXT_OID))):
    body = b"R" + struct.pack(">I", oid) + s("public") + s("t") + identity
    body += struct.pack(">h", len(cols))
    for i, (name, typ) in enumerate(cols):
        body += struct.pack(">B", 1 if i == 0 else 0) + s(name) + struct.pack(">Ii", typ, -1)
    return body


def begin(xid: int = 5) -> bytes:
    return b"B" + struct.pack(">QqI", 100, 0, xid)


def commit(commit_lsn: int, end_lsn: int) -> bytes:
    return b"C" + struct.pack(">BQQq", 0, commit_lsn, end_lsn, 0)


def insert(*values: bytes | None, oid: int = 7) -> bytes:
    return b"I" + struct.pack(">I", oid) + b"N" + tup(*values)


def update(old: tuple, new: tuple, *, oid: int = 7, kind: bytes = b"O") -> bytes:
    return b"U" + struct.pack(">I", oid) + kind + tup(*old) + b"N" + tup(*new)


def delete(*old: bytes | None, oid: int = 7, kind: bytes = b"O") -> bytes:
    return b"D" + struct.pack(">I", oid) + kind + tup(*old)


def test_decode_every_message_kind() -> None:
    rel = pg.decode(relation())
    assert isinstance(rel, pg.Relation)
    assert rel.namespace == "public" and rel.replica_identity == "f"
    assert [c.name for c in rel.columns] == ["id", "v"] and rel.columns[0].is_key
    assert pg.decode(begin(9)) == pg.Begin(100, 0, 9)
    assert pg.decode(commit(10, 20)) == pg.Commit(0, 10, 20, 0)
    assert pg.decode(insert(b"1", None)) == pg.Insert(7, (b"1", None))
    up = pg.decode(update((b"1", b"a"), (b"1", "u")))
    assert isinstance(up, pg.Update) and up.old_kind == "O" and up.new[1] is pg.UNCHANGED_TOAST
    plain = pg.decode(b"U" + struct.pack(">I", 7) + b"N" + tup(b"1", b"b"))
    assert isinstance(plain, pg.Update) and plain.old is None
    assert pg.decode(delete(b"1", b"a")) == pg.Delete(7, "O", (b"1", b"a"))
    trunc = pg.decode(b"T" + struct.pack(">iBII", 2, 0, 7, 8))
    assert trunc == pg.Truncate(0, (7, 8))
    origin = pg.decode(b"O" + struct.pack(">Q", 3) + s("x"))
    assert origin == pg.Origin(3, "x")
    msg = pg.decode(b"M" + struct.pack(">BQ", 1, 4) + s("p") + struct.pack(">i", 2) + b"hi")
    assert msg == pg.LogicalMessage(True, 4, "p", b"hi")
    assert pg.decode(b"Y" + struct.pack(">I", 5) + s("ns") + s("ty")) == pg.TypeMessage(
        5, "ns", "ty"
    )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty"),
        (b"Z", "unknown pgoutput message tag"),
        (begin()[:-1], "truncated"),
        (begin() + b"\x00", "trailing"),
        (b"R" + struct.pack(">I", 1) + b"public", "NUL-terminated"),
        (b"I" + struct.pack(">I", 7) + b"N" + struct.pack(">h", 1) + b"x", "value kind"),
        (b"D" + struct.pack(">I", 7) + b"N" + tup(b"1"), "expected K or O"),
    ],
)
def test_malformed_messages_are_errors(data: bytes, match: str) -> None:
    with pytest.raises(pg.PgOutputError, match=match):
        pg.decode(data)


def test_lsn_text_round_trip() -> None:
    for lsn in (0, 1, 0x16B3748, (5 << 32) | 0xABCDEF):
        assert pg.parse_lsn(pg.format_lsn(lsn)) == lsn
    assert pg.format_lsn((1 << 32) + 0x10) == "1/10"


def test_transactions_become_retractions_and_insertions() -> None:
    other = relation(8, cols=(("x", INT8_OID),)).replace(s("t"), s("other"))
    messages = [
        relation(),
        other,
        begin(),
        insert(b"1", b"a"),
        b"I" + struct.pack(">I", 8) + b"N" + tup(b"9"),  # not one of the source's tables
        update((b"1", b"a"), (b"1", "u")),  # unchanged TOAST value comes from the old row
        commit(10, 20),
        begin(),
        delete(b"1", b"a"),
        insert(b"2", None),
        commit(30, 40),
        begin(),  # not committed yet: not returned
        insert(b"3", b"c"),
    ]
    txns = decode_transactions([TABLE], messages)
    assert [(t.commit_lsn, t.end_lsn) for t in txns] == [(10, 20), (30, 40)]
    assert txns[0].changes == [
        ("public.t", 1, (b"1", b"a")),
        ("public.t", -1, (b"1", b"a")),
        ("public.t", 1, (b"1", b"a")),
    ]
    table = updates_of([TABLE], txns)["public.t"]
    assert table.to_pylist() == [
        {"id": 1, "v": "a", "_diff": 1},
        {"id": 1, "v": "a", "_diff": -1},
        {"id": 1, "v": "a", "_diff": 1},
        {"id": 1, "v": "a", "_diff": -1},
        {"id": 2, "v": None, "_diff": 1},
    ]


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([begin(), relation(identity=b"d")], "REPLICA IDENTITY FULL"),
        ([begin(), relation(cols=(("id", INT8_OID),))], "changed upstream"),
        ([relation(), begin(), delete(b"1", None, kind=b"K")], "without the old row"),
        ([relation(), begin(), update((b"1", None), (b"1", b"b"), kind=b"K")], "old row"),
        ([relation(), begin(), b"T" + struct.pack(">iBI", 1, 0, 7)], "TRUNCATE of public.t"),
        ([begin(), insert(b"1", b"a")], "before its Relation"),
        ([relation(), insert(b"1", b"a")], "outside a transaction"),
        ([relation(), begin(), insert(b"1")], "1 values, expected 2"),
    ],
)
def test_changes_the_source_cannot_follow(messages: list[bytes], match: str) -> None:
    decoder = ChangeDecoder([TABLE])
    *prefix, last = messages
    for m in prefix:
        decoder.feed(pg.decode(m))
    with pytest.raises(SourceError, match=match):
        decoder.feed(pg.decode(last))


def test_the_fast_path_decodes_like_the_general_decoder() -> None:
    messages = [
        insert(b"1", None),
        update((b"1", b"a"), (b"1", "u")),
        b"U" + struct.pack(">I", 7) + b"N" + tup(b"1", b"b"),
        update((b"1",), (b"2", b"x"), kind=b"K"),
        delete(b"1", b"a"),
        delete(b"1", None, kind=b"K"),
    ]
    for m in messages:
        assert pg.decode_change(m) == pg.decode(m)
    assert pg.decode_change(begin()) is None
    assert pg.decode_change(relation()) is None
    for bad in (
        insert(b"1")[:-1],
        delete(b"1") + b"x",
        b"D" + struct.pack(">I", 7) + b"N" + tup(b"1"),
    ):
        with pytest.raises(pg.PgOutputError):
            pg.decode_change(bad)
