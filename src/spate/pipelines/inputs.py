"""File inputs: the directories a pipeline reads with ``spark.read``/``spark.readStream``.

A directory of Parquet, CSV or JSON (one object a line) files becomes a spate table holding
the rows of every file in it, each row tagged with its file's name and version (size and
modification time): ``_spate_file``, ``_spate_version``. Bringing the input up to date
(:func:`sync_input`) compares the directory with the versions recorded in the inputs' frontier
(:mod:`spate.pipelines.file_frontier`), so only changed files are read: a new file's rows are
inserted, a deleted file's rows deleted, a replaced file's old rows deleted and its new ones
inserted. The frontier records each change as pending first, and the table's rows say which
version of a pending file it holds, so an interrupted run resumes exactly: no file is read
twice or lost.

Files are read as Spark reads them by default: Parquet with its own schema; CSV without
``header`` naming columns ``_c0, _c1…`` and every column a string unless ``inferSchema``; JSON
with its fields in alphabetical order. An explicit ``.schema(...)`` fixes names and types.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from spate.persist import latency_trace
from spate.pipelines.errors import DefinitionError
from spate.pipelines.file_frontier import FileFrontier
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    TEXT,
    TIMESTAMP,
    ScalarType,
    numeric,
)

if TYPE_CHECKING:
    from spate.environment.api import Environment

__all__ = [
    "FILE_COLUMN",
    "INPUT_PREFIX",
    "VERSION_COLUMN",
    "FileInput",
    "Synced",
    "describe_input",
    "sync_input",
]

FILE_COLUMN: Final = "_spate_file"
VERSION_COLUMN: Final = "_spate_version"
INPUT_PREFIX: Final = "_spate_in_"
"""The names of the input tables start so."""
_FORMATS: Final = ("parquet", "csv", "json")


@dataclass(frozen=True, slots=True)
class FileInput:
    """A directory read by the pipeline; ``table`` is the spate table of its rows."""

    table: str
    format: str
    directory: str
    options: dict[str, str] = field(default_factory=dict)
    schema: str | None = None
    columns: tuple[tuple[str, str], ...] = ()
    """(name, arrow type name) of the data columns, as the files are read."""
    first: tuple[str, str] | None = None
    """The name and version of the file ``columns`` were read from (the first one)."""

    def names(self) -> list[str]:
        return [n for n, _ in self.columns]

    def files(self) -> dict[str, str]:
        """The directory's data files (name → version), as Spark lists them: hidden files
        (``.``/``_`` prefixes) are not data."""
        out: dict[str, str] = {}
        for p in sorted(Path(self.directory).iterdir()):
            if p.is_file() and not p.name.startswith((".", "_")):
                st = p.stat()
                out[p.name] = f"{st.st_size}-{st.st_mtime_ns}"
        return out

    def read(self, name: str) -> pa.Table:
        return _read(self, Path(self.directory) / name)


def _opt(options: dict[str, str], key: str) -> bool:
    return options.get(key.lower(), "false").lower() == "true"


def _read(inp: FileInput, path: Path, *, schema: pa.Schema | None = None) -> pa.Table:
    opts = {k.lower(): v for k, v in inp.options.items()}
    if inp.format == "parquet":
        # one file: ParquetFile reads it as read_table does, without pyarrow.dataset (whose
        # import brings pandas' in: most of a run's definitions phase)
        table = pq.ParquetFile(path).read()
    elif inp.format == "csv":
        header = _opt(opts, "header")
        infer = _opt(opts, "inferSchema")
        sep = opts.get("sep", opts.get("delimiter", ","))
        read = pcsv.ReadOptions(autogenerate_column_names=not header)
        parse = pcsv.ParseOptions(delimiter=sep)
        convert = None
        if not infer:
            # every column read as the text written ('007', '1.50', 'True'), as Spark reads
            # it: a column inferred first and cast to a string after would read '7', '1.5'
            with pcsv.open_csv(path, read_options=read, parse_options=parse) as reader:
                names = reader.schema.names
            convert = pcsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=True
            )
        table = pcsv.read_csv(path, read_options=read, parse_options=parse,
                              convert_options=convert)  # fmt: skip
        if not header:
            table = table.rename_columns([f"_c{i}" for i in range(table.num_columns)])
    else:
        table = pjson.read_json(path)
        table = table.select(sorted(table.column_names))
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    return table


def _spark_type(t: pa.DataType) -> ScalarType:
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_integer(t):
        return INT64
    if pa.types.is_floating(t):
        return FLOAT64
    if pa.types.is_decimal(t):
        return numeric(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return TEXT
    if pa.types.is_binary(t):
        return BYTES
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    raise DefinitionError(f"a file column of type {t} is not supported by spate's file inputs")


def describe_input(ds: Any, dataset: str, root: Path) -> FileInput:
    """The :class:`FileInput` of a Spark Connect ``Read.DataSource``: its schema from the
    first file. A relative path is relative to ``root``, the spec's directory."""
    fmt = (ds.format or "parquet").lower()
    if fmt not in _FORMATS:
        raise DefinitionError(
            f"dataset {dataset!r} reads format {fmt!r}; spate reads {', '.join(_FORMATS)}"
        )
    if len(ds.paths) != 1:
        raise DefinitionError(f"dataset {dataset!r}: read one directory, not {list(ds.paths)}")
    directory = str((root / ds.paths[0].removeprefix("file://").removeprefix("file:")).resolve())
    options = dict(ds.options)
    if ds.HasField("schema") and ds.schema:
        raise DefinitionError(
            f"dataset {dataset!r}: an explicit reader schema is not supported yet; "
            "files are read with their own (or inferred) schema"
        )
    key = json.dumps([fmt, directory, sorted(options.items())])
    table = INPUT_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:12]
    base = FileInput(table=table, format=fmt, directory=directory, options=options)
    if not Path(directory).is_dir():
        raise DefinitionError(f"dataset {dataset!r} reads {directory}, which is not a directory")
    files = base.files()
    if not files:
        raise DefinitionError(
            f"dataset {dataset!r} reads {directory}, which has no files yet: spate takes the "
            "input's schema from its first file"
        )
    name = next(iter(files))
    first = _read(base, Path(directory) / name)
    cols = tuple((f.name, str(f.type)) for f in first.schema)
    return FileInput(table, fmt, directory, options, None, cols, (name, files[name]))


def input_desc(inp: FileInput) -> RelationDesc:
    first = inp.read(next(iter(inp.files())))
    cols = [Column(f.name, _spark_type(f.type)) for f in first.schema]
    cols += [Column(FILE_COLUMN, TEXT, False), Column(VERSION_COLUMN, TEXT, False)]
    return RelationDesc(cols)


@dataclass(frozen=True, slots=True)
class Synced:
    """The work of bringing an input up to date: files read or retracted, rows read."""

    files: int = 0
    rows: int = 0

    def __add__(self, other: Synced) -> Synced:
        return Synced(self.files + other.files, self.rows + other.rows)


def sync_input(env: Environment, inp: FileInput, frontier: FileFrontier) -> Synced:
    """Bring ``inp``'s table up to date with its directory, reading only the files whose
    version differs from the one ``frontier`` records (:mod:`spate.pipelines.file_frontier`)."""
    if not frontier.known(inp.table):
        frontier.reset(inp.table, held_versions(env, inp))  # a table from before the record
    for name in frontier.pending(inp.table):
        frontier.resolve(inp.table, name, held_version(env, inp, name))
    held = frontier.files(inp.table)
    present = inp.files()
    schema = None
    files = rows = 0
    for name in sorted(set(held) | set(present)):
        old, new = held.get(name), present.get(name)
        if old == new:
            continue
        latency_trace.mark("pipeline_file_seen", inp.table, 0)
        frontier.begin(inp.table, name, old, new)
        if old is not None:
            env.delete(inp.table, where={FILE_COLUMN: name})
        if new is not None:
            table = inp.read(name)
            if schema is None:
                schema = pa.schema(list(_data_schema(env, inp)))
            table = table.select(schema.names).cast(schema)
            n = table.num_rows
            rows += n
            table = table.append_column(FILE_COLUMN, pa.array([name] * n, pa.string()))
            table = table.append_column(VERSION_COLUMN, pa.array([new] * n, pa.string()))
            if n:
                written = env.insert(inp.table, table)
                latency_trace.mark("pipeline_file_inserted", inp.table, written.timestamp)
        frontier.commit(inp.table, name, new)
        files += 1
    return Synced(files, rows)


def _data_schema(env: Environment, inp: FileInput) -> Iterable[pa.Field]:
    from spate.repr.arrow import arrow_field

    for c in env.get(inp.table).desc.columns:
        if c.name not in (FILE_COLUMN, VERSION_COLUMN):
            yield arrow_field(c)


def held_versions(env: Environment, inp: FileInput) -> dict[str, str]:
    """The version of every file ``inp``'s table holds rows of (a read of the whole table)."""
    t = env.sql(f"SELECT DISTINCT {FILE_COLUMN}, {VERSION_COLUMN} FROM {inp.table}")
    assert isinstance(t, pa.Table)
    return dict(zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True))


def held_version(env: Environment, inp: FileInput, name: str) -> str | None:
    """The version of file ``name`` whose rows ``inp``'s table holds, if any."""
    literal = "'" + name.replace("'", "''") + "'"
    t = env.sql(
        f"SELECT DISTINCT {VERSION_COLUMN} FROM {inp.table} WHERE {FILE_COLUMN} = {literal}"
    )
    assert isinstance(t, pa.Table)
    versions = t.column(0).to_pylist()
    if len(versions) > 1:  # cannot happen: a file's old rows are deleted before the new ones
        raise DefinitionError(f"input {inp.table} holds two versions of {name}: {versions}")
    return versions[0] if versions else None
