"""The data directory holds data, secrets and logs: only its owner can read any of it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from spate.environment.api import Environment
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource
from spate.repr import INT64, TEXT, RelationDesc


def _open_to_others(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            found.append(f"{path.relative_to(root.parent)} {oct(mode)}")
    return found


def test_data_directory_is_private_to_its_owner(tmp_path: Path) -> None:
    data = tmp_path / "data"
    old = os.umask(0o022)  # the usual default, which would leave files world-readable
    try:
        env = Environment.open(data)
        try:
            env.create_table("t", RelationDesc.of(("k", INT64, False), ("v", TEXT)))
            env.insert("t", [(1, "secret-ish")])
            assert env.select("t").num_rows == 1
            # A source starts the storage replica: its service directory and log.
            env.create_source("counter", LoadGeneratorSource(LoadGenerator.COUNTER))
        finally:
            env.close()
    finally:
        os.umask(old)
    assert (data / "consensus.db").exists()
    assert any((data / "blob").rglob("*"))
    assert any((data / "services").rglob("service.log"))
    assert _open_to_others(data) == []


def test_reopening_tightens_an_existing_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    Environment.open(data).close()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
