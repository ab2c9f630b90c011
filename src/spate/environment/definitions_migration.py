"""Moving the SQL definitions of an older data directory into the catalog, once, at open.

Data directories written before :mod:`spate.environment.definitions` kept what SQL knows about
their objects in ``<data_dir>/sql/definitions.json``: the CREATE text of each object by name,
the PostgreSQL types of each view's columns by name, the secrets (name → secret reference) and
the connections (name → kind, options, password secret name). :func:`migrate` reads that file,
commits all of it to the catalog in one compare-and-set (:func:`imported`, pure), then renames
the file ``definitions.json.migrated``: nothing reads or writes it again.

The import is idempotent (what the catalog already has is kept), so a crash between the commit
and the rename only repeats it at the next open. An entry that no longer fits the catalog (a
text of an object that is gone, a name that an item took since) is left out and logged; the
renamed file still holds it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from spate.environment.catalog import CatalogState
from spate.environment.definitions import ConnectionEntry, SecretEntry, SqlDefinition
from spate.errors import CatalogError, UsageError
from spate.protocol.secret import SecretRef

if TYPE_CHECKING:
    from spate.environment.runtime import Runtime

_log = logging.getLogger(__name__)

LEGACY_FILE: Final = Path("sql") / "definitions.json"
"""Where older data directories kept the definitions, under the data directory."""
MIGRATED_SUFFIX: Final = ".migrated"


def imported(state: CatalogState, doc: Mapping[str, Any]) -> CatalogState:
    """``state`` with the definitions, secrets and connections of the legacy document ``doc``
    that it does not have yet (pure; entries that do not fit are left out and logged)."""
    texts: Mapping[str, str] = doc.get("definitions", {})
    types: Mapping[str, list[str]] = doc.get("types", {})
    secrets: Mapping[str, str] = doc.get("secrets", {})
    connections: Mapping[str, Mapping[str, Any]] = doc.get("connections", {})
    for name, ref in sorted(secrets.items()):
        if state.secret(name) is not None:
            continue
        text = texts.get(name, f"CREATE SECRET {name} AS '********'")
        try:
            reference = SecretRef(str(ref))
        except ValueError as e:
            _log.warning("legacy secret %r left out: %s", name, e)
            continue
        state = _added(state, SecretEntry(name, text, reference))
    for name, conn in sorted(connections.items()):
        if state.connection(name) is not None:
            continue
        options = tuple(sorted((str(k), str(v)) for k, v in conn.get("options", {}).items()))
        kind = str(conn.get("kind", "postgres"))
        secret = conn.get("secret")
        entry = ConnectionEntry(name, texts.get(name, ""), kind, options, secret)
        state = _added(state, entry)
    for name, text in sorted(texts.items()):
        if name in secrets or name in connections:
            continue
        item = next((i for i in state.items if i.name == name), None)
        if item is None:
            _log.warning("legacy definition of %r left out: no catalog item has that name", name)
            continue
        if state.definition(item.id) is None:
            state = state.set_definition(item.id, SqlDefinition(text, tuple(types.get(name, ()))))
    return state


def migrate(rt: Runtime) -> bool:
    """Import ``<data_dir>/sql/definitions.json`` into the catalog in one commit and rename it
    (module docs). Returns whether there was a file to migrate."""
    path = rt.layout.data_dir / LEGACY_FILE
    if not path.exists():
        return False
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(
            f"{path} (SQL definitions of an older version) cannot be read: {e}; move it away "
            "to open the environment without them"
        ) from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} (SQL definitions of an older version) is not a JSON object")
    rt.commit(lambda s: imported(s, doc))
    os.replace(path, path.with_name(path.name + MIGRATED_SUFFIX))
    _log.info("moved the SQL definitions of %s into the catalog", path)
    return True


def _added(state: CatalogState, entry: SecretEntry | ConnectionEntry) -> CatalogState:
    try:
        if isinstance(entry, SecretEntry):
            return state.add_secret(entry)
        return state.add_connection(entry)
    except CatalogError as e:
        _log.warning("legacy %r left out: %s", entry.name, e)
        return state
