"""Secrets kept out of durable descriptions: the directory, references, resolution."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from spate.codec import decode, encode
from spate.protocol.secret import Secret, SecretRef
from spate.protocol.storage_desc import PostgresSinkConnection, PostgresSinkMode, PostgresSource
from spate.storage.secrets import SecretMissing, SecretsDir, referenced, resolve_with

URL = "postgresql://u:hunter2-canary@db.example/app"


def test_a_secret_is_stored_privately_and_read_back_by_reference(tmp_path: Path) -> None:
    secrets = SecretsDir(tmp_path / "secrets")
    ref = secrets.put(Secret(URL))
    path = tmp_path / "secrets" / ref.id
    assert path.read_text() == URL
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700
    assert secrets.get(ref) == Secret(URL)
    assert secrets.put(Secret(URL)) != ref  # a fresh id each time
    secrets.delete(ref)
    with pytest.raises(SecretMissing, match=f"secret {ref.id} is not in") as e:
        secrets.get(ref)
    assert "hunter2" not in str(e.value)
    secrets.delete(ref)  # idempotent


@pytest.mark.parametrize(
    "connection",
    [
        PostgresSource(Secret(URL), "pub", "slot"),
        PostgresSinkConnection(Secret(URL), "t", PostgresSinkMode.UPSERT, key=("id",)),
    ],
)
def test_externalized_connections_hold_only_a_reference_on_the_wire(
    tmp_path: Path, connection: PostgresSource | PostgresSinkConnection
) -> None:
    secrets = SecretsDir(tmp_path)
    stored = secrets.externalize(connection)
    ref = referenced(stored)
    assert ref is not None and referenced(connection) is None
    wire = encode(stored)
    assert b"hunter2" not in wire  # what the catalog and the controller's metadata keep
    assert decode(wire, type(stored)) == stored
    assert secrets.resolve(decode(wire, type(stored))) == connection
    assert resolve_with(secrets, stored) == connection
    assert secrets.externalize(stored) == stored  # already a reference: unchanged
    assert resolve_with(None, connection) == connection  # a literal needs no directory
    with pytest.raises(SecretMissing, match=f"secret {ref.id}: this replica was started without"):
        resolve_with(None, stored)
    with pytest.raises(LookupError, match=f"secret {ref.id} was not resolved"):
        stored.connection.reveal()


def test_reference_ids_are_plain_file_names() -> None:
    for bad in ("", "../etc/passwd", "a/b", ".hidden", "x" * 200):
        with pytest.raises(ValueError, match="secret reference id"):
            SecretRef(bad)
    assert SecretRef("s-0123abcd").id == "s-0123abcd"
