"""The SQL definitions file under two writers: each save is whole and atomic.

Two ``Definitions`` on one data directory (two environments, each with its own lock) save
concurrently; with one shared temporary file name, one writer's rename took the other's file
(FileNotFoundError) or published a half-written one. Every save must succeed, the file must
always parse, and no temporary file may be left behind.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

from spate.environment.sql_state import Definitions
from spate.storage.secrets import SecretsDir

if TYPE_CHECKING:
    from pathlib import Path


def test_concurrent_saves_from_two_writers_are_atomic(tmp_path: Path) -> None:
    secrets = SecretsDir(tmp_path / "secrets")
    writers = [Definitions(tmp_path, secrets), Definitions(tmp_path, secrets)]
    errors: list[BaseException] = []
    seen_bad: list[str] = []
    stop = threading.Event()

    def write(k: int) -> None:
        try:
            for i in range(300):
                writers[k].set(f"v{k}_{i % 7}", f"CREATE VIEW v AS SELECT {'x' * (i * 37 % 900)}")
        except BaseException as e:
            errors.append(e)

    def read() -> None:
        path = tmp_path / "sql" / "definitions.json"
        while not stop.is_set():
            if path.exists():
                text = path.read_text()
                try:
                    json.loads(text)
                except ValueError:
                    seen_bad.append(text[:80])

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    reader.join()
    assert not errors, errors[:3]
    assert not seen_bad, seen_bad[:3]
    doc = json.loads((tmp_path / "sql" / "definitions.json").read_text())
    assert set(doc["definitions"]) <= {f"v{k}_{j}" for k in range(2) for j in range(7)}
    leftovers = [p.name for p in (tmp_path / "sql").iterdir() if p.name != "definitions.json"]
    assert leftovers == []
    # a reopened Definitions reads what was saved last
    again = Definitions(tmp_path, secrets)
    assert again.items == doc["definitions"]


def test_a_views_column_types_are_kept_until_it_is_dropped(tmp_path: Path) -> None:
    secrets = SecretsDir(tmp_path / "secrets")
    defs = Definitions(tmp_path, secrets)
    defs.set("v", "CREATE VIEW v AS SELECT 1::int AS a, 0.5::real AS b", ("int4", "float4"))
    defs.set("t", "CREATE TABLE t (x int)")
    again = Definitions(tmp_path, secrets)
    assert again.types == {"v": ["int4", "float4"]}
    again.set("v", None)
    assert Definitions(tmp_path, secrets).types == {}
