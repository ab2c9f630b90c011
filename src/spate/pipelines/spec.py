"""A pipeline spec, read exactly as ``spark-pipelines`` reads it.

``pipeline.yml`` (or ``spark-pipeline.yml``/``.yaml``) holds ``name`` and ``storage``
(required), ``catalog``, ``database`` (or ``schema``), ``configuration`` (string → string) and
``libraries``: a list of ``{glob: {include: PATTERN}}``. A pattern is a file path or a folder
ending in ``/**`` (every file under it, recursively); any other wildcard is refused, as
``spark-pipelines`` refuses it. Paths are relative to the spec's directory; ``.py`` files are
imported, ``.sql`` files registered, any other extension is an error.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml  # type: ignore[import-untyped]

from spate.pipelines.errors import SpecError

__all__ = ["SPEC_FILE_NAMES", "PipelineSpec", "find_spec", "load_spec"]

SPEC_FILE_NAMES: Final = ("spark-pipeline.yaml", "spark-pipeline.yml")
_ALLOWED: Final = frozenset(
    {"name", "storage", "catalog", "database", "schema", "configuration", "libraries"}
)


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    """A loaded spec. ``root`` is the spec file's directory; ``libraries`` the normalized glob
    patterns (``dir/**`` becomes ``dir/**/*``, as ``spark-pipelines`` normalizes it)."""

    path: Path
    name: str
    storage: str
    catalog: str | None = None
    database: str | None = None
    configuration: Mapping[str, str] = field(default_factory=dict)
    libraries: tuple[str, ...] = ()

    @property
    def root(self) -> Path:
        return self.path.parent.resolve()

    def storage_dir(self) -> Path:
        """The pipeline's storage, a path (a ``file:`` URI is accepted), relative to the root."""
        text = self.storage.removeprefix("file://").removeprefix("file:")
        return (self.root / text).resolve()

    def files(self) -> list[Path]:
        """The definition files, in the order ``spark-pipelines`` loads them."""
        out: list[Path] = []
        for pattern in self.libraries:
            for p in self.root.glob(pattern):
                if p.is_file() and "__pycache__" not in p.parts:
                    if p.suffix not in (".py", ".sql"):
                        raise SpecError(
                            f"{p}: a pipeline definition file must be .py or .sql "
                            f"(from the library glob {pattern!r} of {self.path})"
                        )
                    out.append(p)
        return out


def _normalized_glob(pattern: str, spec_path: Path) -> str:
    if not glob.has_magic(pattern):
        return pattern
    if pattern.endswith("/**") and not glob.has_magic(pattern[:-3]):
        return pattern + "/*"
    raise SpecError(
        f"{spec_path}: library glob {pattern!r} is not a file path nor a folder ending in /**"
    )


def _str_dict(value: object, name: str, spec_path: Path) -> dict[str, str]:
    if not isinstance(value, dict):
        raise SpecError(f"{spec_path}: {name} must be a mapping, not {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise SpecError(f"{spec_path}: {name} must map strings to strings; {k!r}: {v!r}")
    return dict(value)


def load_spec(path: Path) -> PipelineSpec:
    """The spec at ``path`` (a file, or a directory holding one of :data:`SPEC_FILE_NAMES`)."""
    path = find_spec(path) if path.is_dir() else path
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"cannot read pipeline spec {path}: {e}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a pipeline spec is a mapping")
    unknown = sorted(set(data) - _ALLOWED)
    if unknown:
        raise SpecError(f"{path}: unexpected field(s) {unknown}; allowed: {sorted(_ALLOWED)}")
    for key in ("name", "storage"):
        if not isinstance(data.get(key), str):
            raise SpecError(f"{path}: the field {key!r} is required (a string)")
    libraries: list[str] = []
    for entry in data.get("libraries") or []:
        try:
            include = entry["glob"]["include"]
        except (KeyError, TypeError):
            raise SpecError(
                f"{path}: a library is {{glob: {{include: PATTERN}}}}, not {entry!r}"
            ) from None
        libraries.append(_normalized_glob(str(include), path))
    return PipelineSpec(
        path=path.resolve(),
        name=data["name"],
        storage=data["storage"],
        catalog=data.get("catalog"),
        database=data.get("database", data.get("schema")),
        configuration=_str_dict(data.get("configuration", {}), "configuration", path),
        libraries=tuple(libraries),
    )


def find_spec(directory: Path) -> Path:
    """The spec file in ``directory`` or its nearest ancestor that has one."""
    current = directory.resolve()
    while True:
        found = [current / n for n in (*SPEC_FILE_NAMES, "pipeline.yml", "pipeline.yaml")]
        found = [p for p in found if p.is_file()]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise SpecError(f"{current}: more than one pipeline spec file: {found}")
        if current.parent == current:
            raise SpecError(f"no pipeline spec file in {directory} or its parents")
        current = current.parent
