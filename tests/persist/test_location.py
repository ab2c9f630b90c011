"""PersistLocation: URIs, validation, redaction, codec round trip, and opening the stores."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from spate import codec
from spate.persist.blob_file import FileBlob
from spate.persist.blob_mem import MemBlob
from spate.persist.consensus_mem import MemConsensus
from spate.persist.consensus_sqlite import SqliteConsensus
from spate.persist.errors import InvalidLocation
from spate.persist.location import PersistLocation, open_blob, open_consensus, redact_uri


def test_embedded_location_lives_under_the_data_dir(tmp_path: Path) -> None:
    loc = PersistLocation.embedded(tmp_path / "data")
    assert loc.blob_uri == (tmp_path / "data" / "blob").resolve().as_uri()
    assert loc.consensus_uri == f"sqlite://{(tmp_path / 'data' / 'consensus.db').resolve()}"
    blob = open_blob(loc.blob_uri)
    consensus = open_consensus(loc.consensus_uri)
    assert isinstance(blob, FileBlob) and blob.root == (tmp_path / "data" / "blob").resolve()
    assert isinstance(consensus, SqliteConsensus)
    assert (tmp_path / "data" / "consensus.db").exists()
    consensus.close()


def test_mem_location_opens_the_same_named_store_each_time() -> None:
    loc = PersistLocation.memory("test-location-shared")
    assert open_blob(loc.blob_uri) is open_blob(loc.blob_uri)
    assert isinstance(open_blob(loc.blob_uri), MemBlob)
    assert isinstance(open_consensus(loc.consensus_uri), MemConsensus)
    assert open_consensus(loc.consensus_uri) is open_consensus(loc.consensus_uri)


@pytest.mark.parametrize(
    ("blob_uri", "consensus_uri"),
    [
        ("file:///var/spate/blob", "sqlite:///var/spate/consensus.db"),
        ("mem://x", "mem://x"),
        ("s3://bucket/some/prefix?endpoint=http://127.0.0.1:9000&region=eu-west-1", "mem://y"),
        ("file:///d", "postgresql://spate:hunter2@db.example:5432/spate?table=c&schema=s"),
    ],
)
def test_parse_and_codec_round_trip(blob_uri: str, consensus_uri: str) -> None:
    loc = PersistLocation.parse(blob_uri, consensus_uri)
    assert PersistLocation.parse(loc.blob_uri, loc.consensus_uri) == loc
    assert codec.decode(codec.encode(loc), PersistLocation) == loc


def test_passwords_never_appear_in_str_repr_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    canary = "canary-s3cr3t-41"
    loc = PersistLocation("mem://a", f"postgresql://spate:{canary}@db:5432/spate")
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("spate.test").info("location %s %r", loc, loc)
    assert canary not in str(loc) and canary not in repr(loc)
    assert canary not in caplog.text
    assert "spate:***@db:5432" in str(loc)
    assert redact_uri("postgresql://u@h/db") == "postgresql://u@h/db"


@pytest.mark.parametrize(
    ("blob_uri", "consensus_uri", "fragment"),
    [
        ("ftp://x/y", "mem://a", "blob scheme"),
        ("file://relative/dir", "mem://a", "absolute path"),
        ("mem://", "mem://a", "needs a name"),
        ("s3:///nobucket", "mem://a", "bucket"),
        ("mem://a", "mysql://h/db", "consensus scheme"),
        ("mem://a", "sqlite://relative.db", "absolute path"),
    ],
)
def test_invalid_locations_are_refused(blob_uri: str, consensus_uri: str, fragment: str) -> None:
    with pytest.raises(InvalidLocation) as e:
        PersistLocation(blob_uri, consensus_uri)
    assert fragment in str(e.value)


def test_invalid_location_error_does_not_leak_password() -> None:
    with pytest.raises(InvalidLocation) as e:
        PersistLocation("mem://a", "mysql://u:leakme@h/db")
    assert "leakme" not in str(e.value)


def test_unknown_s3_parameters_are_refused() -> None:
    with pytest.raises(InvalidLocation, match="unknown s3 parameters"):
        open_blob("s3://bucket/p?secret_key=nope")
