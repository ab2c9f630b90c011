"""The Blob conformance suite: every implementation (mem, file, S3 on moto) passes it."""

from __future__ import annotations

import threading

import pytest

from spate.persist.errors import InvalidKey
from spate.persist.location import Blob


def test_get_of_absent_key_is_none(blob: Blob) -> None:
    assert blob.get("nothing/here") is None


def test_set_then_get_returns_exact_bytes(blob: Blob) -> None:
    payloads = {"a": b"hello", "dir/b.parquet": bytes(range(256)) * 4096, "empty": b""}
    for k, v in payloads.items():
        blob.set(k, v)
    for k, v in payloads.items():
        assert blob.get(k) == v


def test_set_again_with_same_bytes_is_idempotent(blob: Blob) -> None:
    blob.set("k", b"v1")
    blob.set("k", b"v1")
    assert blob.get("k") == b"v1"
    assert [k for k, _ in blob.list_keys("")] == ["k"]


def test_delete_returns_size_and_is_idempotent(blob: Blob) -> None:
    blob.set("x/y", b"12345")
    assert blob.delete("x/y") == 5
    assert blob.get("x/y") is None
    assert blob.delete("x/y") is None
    assert blob.delete("never") is None


def test_list_keys_filters_by_prefix_with_sizes(blob: Blob) -> None:
    blob.set("s1/a.parquet", b"aa")
    blob.set("s1/b.parquet", b"bbb")
    blob.set("s2/a.parquet", b"c")
    blob.set("s10/z", b"dddd")
    assert sorted(blob.list_keys("s1/")) == [("s1/a.parquet", 2), ("s1/b.parquet", 3)]
    assert sorted(k for k, _ in blob.list_keys("s1")) == ["s1/a.parquet", "s1/b.parquet", "s10/z"]
    assert sorted(k for k, _ in blob.list_keys("")) == [
        "s1/a.parquet",
        "s1/b.parquet",
        "s10/z",
        "s2/a.parquet",
    ]
    assert list(blob.list_keys("nope/")) == []


@pytest.mark.parametrize(
    "key", ["", "/abs", "a//b", "../up", "a/../b", ".hidden", "a/.tmp-x", "sp ace"]
)
def test_invalid_keys_are_rejected(blob: Blob, key: str) -> None:
    with pytest.raises(InvalidKey):
        blob.set(key, b"x")
    with pytest.raises(InvalidKey):
        blob.get(key)


def test_local_path_when_offered_holds_the_bytes(blob: Blob) -> None:
    blob.set("p/q.parquet", b"local bytes")
    path = blob.local_path("p/q.parquet")
    if path is not None:
        with open(path, "rb") as f:
            assert f.read() == b"local bytes"


def test_concurrent_sets_of_distinct_keys_all_land(blob: Blob) -> None:
    def work(i: int) -> None:
        for j in range(10):
            blob.set(f"t{i}/k{j}", f"{i}-{j}".encode())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keys = dict(blob.list_keys(""))
    assert len(keys) == 40
    for i in range(4):
        for j in range(10):
            assert blob.get(f"t{i}/k{j}") == f"{i}-{j}".encode()
