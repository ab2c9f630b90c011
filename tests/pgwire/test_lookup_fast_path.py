"""A prepared lookup's Bind, Describe, Execute and Sync answered in one step, as they arrive
(spate.pgwire.session.Session._answer_lookup, EnvironmentEngine.lookup_at_once): the same
bytes as the messages handled one by one, the same answers as PostgreSQL's, and the step
actually taken (counted, not timed)."""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from spate.pgwire.session import Session
from tests.pgwire import wire
from tests.pgwire._calls import calls
from tests.pgwire._encoded import encoded_rows
from tests.pgwire._pg_scratch import pg_scratch
from tests.pgwire._served import environment_served


@pytest.fixture(params=["no cluster", "cluster"])
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[int, str]]:
    """A server over an environment without clusters, or with a cluster of one replica the
    sessions run on; its port and a psycopg DSN."""
    with environment_served(tmp_path / "data", cluster=request.param == "cluster") as (
        _,
        port,
        dsn,
    ):
        yield port, dsn


class _Answered:
    """How many lookups were answered in one step; ``off`` turns the step off (every message
    is then handled one by one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.off = False
        real = Session._answer_lookup

        def counting(session: Session, *args: Any) -> int:
            if self.off:
                return 0
            taken: int = real(session, *args)
            self.count += taken > 0
            return taken

        monkeypatch.setattr(Session, "_answer_lookup", counting)


def _bind(
    values: list[bytes | None],
    *,
    stmt: str,
    param_formats: tuple[int, ...] = (),
    result_formats: tuple[int, ...] = (),
    portal: str = "",
) -> bytes:
    body = portal.encode() + b"\0" + stmt.encode() + b"\0"
    body += struct.pack(f"!H{len(param_formats)}h", len(param_formats), *param_formats)
    body += struct.pack("!H", len(values))
    for v in values:
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    body += struct.pack(f"!H{len(result_formats)}h", len(result_formats), *result_formats)
    return wire.message(b"B", body)


_DESCRIBE = wire.message(b"D", b"P\0")
_EXECUTE = wire.message(b"E", b"\0\0\0\0\0")
_SYNC = wire.message(b"S")


def _query(sql: str) -> bytes:
    return wire.message(b"Q", sql.encode() + b"\0")


def _lookup(key: bytes | None, **kwargs: Any) -> bytes:
    return _bind([key], stmt="s1", **kwargs) + _DESCRIBE + _EXECUTE + _SYNC


def _int8(v: int) -> bytes:
    return struct.pack("!q", v)


_SCRIPT: list[bytes] = [
    wire.parse_msg("SELECT v, id, n FROM t WHERE id = $1", "s1", (20,)) + _SYNC,
    wire.parse_msg("SELECT id FROM t WHERE v = $1", "s2", (25,)) + _SYNC,
    *[_lookup(k) for k in (b"1", b"2", b"3", b"9", b"1", b"2", b"3", b"9")],
    _lookup(b"1", result_formats=(1,)),  # binary results
    _lookup(b"2", result_formats=(1,)),  # NULLs in binary
    _lookup(_int8(3), param_formats=(1,)),  # a binary value
    _lookup(_int8(3), param_formats=(1,), result_formats=(1,)),
    _bind([b"1"], stmt="s1") + _EXECUTE + _SYNC,  # no Describe
    _lookup(b"1") + _lookup(b"2") + _lookup(b"9") + _lookup(b"3"),  # several in one packet
    _lookup(b"1") + wire.message(b"E", b"\0\0\0\0\0") + _SYNC,  # the portal executed again
    _lookup(b"1") + _DESCRIBE + _EXECUTE + _SYNC,  # described and executed again
    _lookup(b"3") + wire.message(b"C", b"P\0") + _EXECUTE + _SYNC,  # closed: 34000
    _lookup(b"1") + _lookup(b"abc") + _lookup(b"2"),  # 22P02 between two lookups
    _lookup(b"2") + _bind([b"1"], stmt="s1") + _EXECUTE + _SYNC,  # a Bind with no Sync after
    _lookup(struct.pack("!i", 7), param_formats=(1,)),  # 4 bytes for an int8: 22P02
    _lookup(None),  # NULL: planned as usual
    _lookup(b"99999999999999999999"),  # beyond bigint: 22003 as usual
    _lookup(b"1", result_formats=(0, 1)),  # two formats for three columns: 08P01
    _bind([b"1"], stmt="s1", portal="p")  # a named portal
    + wire.message(b"D", b"Pp\0")
    + wire.message(b"E", b"p\0\0\0\0\0")
    + _SYNC,
    _bind([b"1"], stmt="nope") + _DESCRIBE + _EXECUTE + _SYNC,  # 26000
    *[_bind([v], stmt="s2") + _DESCRIBE + _EXECUTE + _SYNC for v in (b"a", b"it's", b"zz")] * 2,
    _query("INSERT INTO t VALUES (4, 'd', 40)") + _lookup(b"4"),  # seen at once
    _query("UPDATE t SET v = 'e' WHERE id = 4"),
    _lookup(b"4"),
    _query("DELETE FROM t WHERE id = 4") + _lookup(b"4"),
    _query("BEGIN"),
    _lookup(b"1"),  # in a transaction block: read as the block reads
    _lookup(b"4"),
    _lookup(b"abc"),  # fails the block
    _lookup(b"1"),  # 25P02
    _query("ROLLBACK"),
    _lookup(b"1"),
    _query("SET transaction_isolation = 'serializable'"),
    _lookup(b"1"),
    _lookup(b"3"),
    _query("SET cluster = 'nope'"),
    _lookup(b"1"),  # a cluster that does not exist: its error, as usual
    _query("RESET cluster"),
    _lookup(b"1"),
    # the same Bind with values of other lengths, then a NULL, after lookups of one shape
    _lookup(b"12345") + _lookup(b"3") + _lookup(b"-1") + _lookup(None) + _lookup(b"2"),
    # the statement described (ParameterDescription known), then looked up again
    wire.message(b"D", b"Ss1\0") + _SYNC,
    _lookup(b"1") + _lookup(b"3"),
    # s1 closed and prepared again as another statement: its lookups answer the new one
    wire.message(b"C", b"Ss1\0") + wire.parse_msg("SELECT n, v FROM t WHERE id = $1", "s1", (20,)),
    _SYNC,
    _lookup(b"1") + _lookup(b"3") + _lookup(b"2"),
    # and as a statement of a text parameter: the same Bind's bytes, another decoding
    wire.message(b"C", b"Ss1\0") + wire.parse_msg("SELECT id, n FROM t WHERE v = $1", "s1", (25,)),
    _SYNC,
    _lookup(b"1") + _lookup(b"a") + _lookup(b"2"),
    wire.message(b"X"),
]


def _converse(port: int, script: list[bytes]) -> list[tuple[bytes, bytes]]:
    """Every message the server answers ``script`` with (each packet sent whole; the answers
    read up to as many ReadyForQuery as it has Syncs and queries)."""
    sock = wire.connect(port)
    out: list[tuple[bytes, bytes]] = []
    try:
        for packet in script:
            sock.sendall(packet)
            if packet == wire.message(b"X"):
                break
            syncs = _count(packet, (b"S", b"Q"))
            for _ in range(syncs):
                out.extend(wire.until(sock, b"Z"))
    finally:
        sock.close()
    return out


def _count(packet: bytes, kinds: tuple[bytes, ...]) -> int:
    """How many messages of ``kinds`` ``packet`` holds."""
    at, n = 0, 0
    while at < len(packet):
        (length,) = struct.unpack_from("!i", packet, at + 1)
        n += packet[at : at + 1] in kinds
        at += 1 + length
    return n


def _setup(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (id bigint NOT NULL, v text, n bigint)")
        c.execute("INSERT INTO t VALUES (1, 'a', 10), (2, NULL, NULL), (3, 'it''s', -5)")


def test_answered_in_one_step_as_message_by_message(
    served: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same conversation (lookups in text and binary, NULLs, missing keys, several
    lookups in one packet, the portal used again after them, errors, writes between
    lookups, a transaction block, serializable reads, another cluster) gets the same bytes
    with lookups answered in one step as with every message handled one by one."""
    port, dsn = served
    _setup(dsn)
    answered = _Answered(monkeypatch)
    answered.off = True
    one_by_one = _converse(port, _SCRIPT)
    assert answered.count == 0
    answered.off = False
    in_one_step = _converse(port, _SCRIPT)
    assert [m[0] for m in in_one_step] == [m[0] for m in one_by_one]
    assert in_one_step == one_by_one
    assert answered.count >= 20, answered.count
    codes = [wire.error_code(body) for kind, body in one_by_one if kind == b"E"]
    # the errors the script makes; the ninth, of a cluster that does not exist
    assert codes[:8] == ["34000", "22P02", "22P02", "22003", "08P01", "26000", "22P02", "25P02"]
    assert len(codes) == 9


def test_a_bind_like_the_last_one_is_not_parsed_again(
    served: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup's Bind of the shape of the last one answered in one step (the same
    statement, formats and count of values) is read without parsing it again; its answers
    are those of every other lookup."""
    import spate.pgwire.codec as codec

    port, dsn = served
    _setup(dsn)
    answered = _Answered(monkeypatch)
    parsed = calls(monkeypatch, codec, "parse_bind")
    want = {b"1": 1, b"2": 1, b"3": 1, b"9": 0, b"12345": 0}
    sock = wire.connect(port)
    try:
        sock.sendall(wire.parse_msg("SELECT v, id, n FROM t WHERE id = $1", "s1", (20,)) + _SYNC)
        wire.until(sock, b"Z")
        for _ in range(3):  # the first Binds: read as usual, then in one step
            sock.sendall(_lookup(b"1"))
            wire.until(sock, b"Z")
        before = answered.count
        parsed.clear()
        for _ in range(5):
            for key, rows in want.items():
                sock.sendall(_lookup(key))
                got = wire.until(sock, b"Z")
                assert [kind for kind, _ in got] == [b"2", b"T", *[b"D"] * rows, b"C", b"Z"]
    finally:
        sock.close()
    assert answered.count - before == 5 * len(want)
    assert parsed == [], parsed


def _pg_url() -> str:
    return os.environ.get("SPATE_TEST_POSTGRES_URL", "")


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_lookups_answer_as_postgresql_does(
    served: tuple[int, str], monkeypatch: pytest.MonkeyPatch, binary: bool
) -> None:
    """Prepared lookups through psycopg, in text and binary: rows, NULLs, missing keys,
    column descriptions, a wrong parameter type's error, a write seen by the next lookup,
    and lookups inside a transaction block, as PostgreSQL answers them."""
    _, dsn = served
    _setup(dsn)
    ddl = [
        "CREATE TABLE t (id bigint NOT NULL, v text, n bigint)",
        "INSERT INTO t VALUES (1, 'a', 10), (2, NULL, NULL), (3, 'it''s', -5)",
    ]
    answered = _Answered(monkeypatch)
    lookup = "SELECT v, id, n FROM t WHERE id = %s"
    by_text = "SELECT id, n FROM t WHERE v = %s"
    with (
        pg_scratch(ddl, "fast_lookup") as schema,
        psycopg.connect(_pg_url(), autocommit=True) as pg,
        psycopg.connect(dsn, autocommit=True) as c,
    ):
        pg.execute(f"SET search_path = {schema}")
        ours, theirs = c.cursor(binary=binary), pg.cursor(binary=binary)

        def same(sql: str, args: tuple[object, ...]) -> None:
            got = ours.execute(sql, args, prepare=True).fetchall()
            want = theirs.execute(sql, args, prepare=True).fetchall()
            assert got == want, (sql, args)
            assert ours.description is not None and theirs.description is not None
            assert [(d.name, d.type_code) for d in ours.description] == [
                (d.name, d.type_code) for d in theirs.description
            ]

        for _ in range(3):
            for k in (1, 2, 3, 9, -1, 2**62):
                same(lookup, (k,))
            for v in ("a", "it's", "", "nope"):
                same(by_text, (v,))
        assert answered.count >= 20, answered.count

        for sql in (lookup, by_text):  # the wrong type: the same error as PostgreSQL's
            wrong: tuple[object, ...] = ("x",) if sql == lookup else (1,)
            with pytest.raises(psycopg.Error) as raised:
                ours.execute(sql, wrong, prepare=True)
            with pytest.raises(psycopg.Error) as expected:
                theirs.execute(sql, wrong, prepare=True)
            assert raised.value.sqlstate == expected.value.sqlstate, (
                raised.value,
                expected.value,
            )
        same(lookup, (1,))  # still usable, still answered

        for db in (c, pg):
            db.execute("INSERT INTO t VALUES (4, 'd', 40)")
        same(lookup, (4,))  # strictly serializable: the acknowledged write is seen
        for db in (c, pg):
            db.execute("UPDATE t SET n = 41 WHERE id = 4")
        same(lookup, (4,))

        before = answered.count
        for db in (c, pg):
            db.execute("BEGIN")
        same(lookup, (1,))
        same(lookup, (4,))
        same(by_text, ("d",))
        assert c.info.transaction_status == pg.info.transaction_status
        for db in (c, pg):
            db.execute("COMMIT")
        assert answered.count == before  # a transaction block reads as it always does
        same(lookup, (4,))
        assert answered.count == before + 1


def test_pipelined_lookups_are_answered_in_order(
    served: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg's pipeline mode (Binds, Describes and Executes, one Sync at the end) and many
    lookups written at once, each with its Sync, are answered in order."""
    port, dsn = served
    _setup(dsn)
    answered = _Answered(monkeypatch)
    lookup = "SELECT v, id, n FROM t WHERE id = %s"
    want = {1: [("a", 1, 10)], 2: [(None, 2, None)], 3: [("it's", 3, -5)], 9: []}
    with psycopg.connect(dsn, autocommit=True) as c:
        for k in want:
            assert c.execute(lookup, (k,), prepare=True).fetchall() == want[k]
        with c.pipeline():
            cursors = [c.execute(lookup, (k,), prepare=True) for k in [1, 2, 3, 9] * 5]
        for cur, k in zip(cursors, [1, 2, 3, 9] * 5, strict=True):
            assert cur.fetchall() == want[k]
    # many lookups in one write, each with its Sync: answered one after the other
    keys = [1, 2, 3, 9] * 50
    setup = [
        wire.parse_msg("SELECT v, id, n FROM t WHERE id = $1", "s1", (20,)) + _SYNC,
        *[_lookup(b"1")] * 3,
    ]
    sock = wire.connect(port)
    try:
        for packet in setup:
            sock.sendall(packet)
            wire.until(sock, b"Z")
        before = answered.count
        sock.sendall(b"".join(_lookup(str(k).encode()) for k in keys))
        for k in keys:
            got = wire.until(sock, b"Z")
            rows = [body for kind, body in got if kind == b"D"]
            assert len(rows) == len(want[k]), k
            assert [kind for kind, _ in got][-2:] == [b"C", b"Z"]
        # a lookup that arrives in pieces (the Bind cut short, then the rest): read as usual
        for cut in (3, 12, len(_lookup(b"1")) - 3):
            packet = _lookup(b"1")
            sock.sendall(packet[:cut])
            time.sleep(0.05)
            sock.sendall(packet[cut:])
            got = wire.until(sock, b"Z")
            assert [kind for kind, _ in got] == [b"2", b"T", b"D", b"C", b"Z"]
    finally:
        sock.close()
    assert answered.count - before >= len(keys)


def test_a_keys_answer_is_kept_while_its_rows_are_unchanged(
    served: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup of a key looked up before, its rows unchanged, gives the answer made the
    first time (the rows are not read, checked, kept or encoded again); a write to the
    table gives the new answers. (Compaction rewriting the table's parts makes the answers
    anew, so a round with nothing encoded is waited for, a few rounds at most.)"""
    _, dsn = served
    _setup(dsn)
    answered = _Answered(monkeypatch)
    encoded = encoded_rows(monkeypatch)
    lookup = "SELECT v, id, n FROM t WHERE id = %s"
    want = {1: [("a", 1, 10)], 2: [(None, 2, None)], 3: [("it's", 3, -5)], 9: []}

    def rounds_until_none_encoded(c: psycopg.Connection[Any]) -> int:
        for n in range(1, 11):
            before = answered.count
            encoded.clear()
            for k in want:
                assert c.execute(lookup, (k,), prepare=True).fetchall() == want[k]
            if answered.count == before + len(want) and not encoded:
                return n
        return 0

    with psycopg.connect(dsn, autocommit=True) as c:
        for _ in range(3):  # prepared (psycopg prepares on the third), then kept
            for k in want:
                assert c.execute(lookup, (k,), prepare=True).fetchall() == want[k]
        assert rounds_until_none_encoded(c) > 0  # each answer sent as encoded before
        c.execute("UPDATE t SET n = 11 WHERE id = 1")
        c.execute("INSERT INTO t VALUES (9, 'i', 90)")
        want[1], want[9] = [("a", 1, 11)], [("i", 9, 90)]
        encoded.clear()
        for k in want:  # the new answers (the first may wait for the write, as usual)
            assert c.execute(lookup, (k,), prepare=True).fetchall() == want[k]
        assert ("a", 1, 11) in encoded and ("i", 9, 90) in encoded
        assert rounds_until_none_encoded(c) > 0


def test_sessions_share_what_their_lookups_read(
    served: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key one session looked up is not read again from the index (nor checked) when
    another session looks it up with the same prepared statement; both see a write."""
    import spate.environment.reads_at_once as reads_at_once

    _, dsn = served
    _setup(dsn)
    answered = _Answered(monkeypatch)
    read = calls(monkeypatch, reads_at_once, "base_rows")
    lookup = "SELECT v, id, n FROM t WHERE id = %s"
    want = {1: [("a", 1, 10)], 2: [(None, 2, None)], 3: [("it's", 3, -5)], 9: []}
    with psycopg.connect(dsn, autocommit=True) as a:
        for _attempt in range(10):  # compaction rewriting the parts makes them read anew
            for _ in range(3):
                for k in want:
                    assert a.execute(lookup, (k,), prepare=True).fetchall() == want[k]
            before = answered.count
            read.clear()
            with psycopg.connect(dsn, autocommit=True) as b:  # a new session
                for _ in range(3):
                    for k in want:
                        assert b.execute(lookup, (k,), prepare=True).fetchall() == want[k]
            if answered.count > before and not read:
                break
        else:
            raise AssertionError(f"another session read the keys again: {read}")
        a.execute("UPDATE t SET n = 12 WHERE id = 1")
        with psycopg.connect(dsn, autocommit=True) as b:
            for c in (a, b):
                assert c.execute(lookup, (1,), prepare=True).fetchall() == [("a", 1, 12)]
