"""The errors of a pipeline: its spec, its definitions, and what cannot be maintained.

Each carries its SQLSTATE as data (``sqlstate``) and names the file, dataset and line involved.
"""

from __future__ import annotations

from spate.errors import UsageError

__all__ = [
    "DefinitionError",
    "NotMaintainable",
    "PipelineError",
    "SpecError",
]


class PipelineError(UsageError):
    """Root of the pipeline errors: nothing was created, written or changed."""

    sqlstate: str = "42000"


class SpecError(PipelineError, ValueError):
    """The pipeline spec (``pipeline.yml``) is missing, malformed or names what is not there."""

    sqlstate = "22023"


class DefinitionError(PipelineError, ValueError):
    """A definition file failed to load, or the graph it defines is inconsistent (a dataset
    defined twice, a flow into nothing, a cycle, a read of a name nothing defines)."""

    sqlstate = "42P17"


class NotMaintainable(PipelineError, ValueError):
    """A dataset's query cannot be maintained incrementally with the same result as Spark's:
    a non-deterministic function, an operator spate does not translate. The message names the
    dataset, the operator and the line of the user's file."""

    sqlstate = "0A000"

    def __init__(self, dataset: str, operator: str, where: str, why: str = "") -> None:
        self.dataset, self.operator, self.where = dataset, operator, where
        tail = f": {why}" if why else ""
        super().__init__(f"dataset {dataset!r}: {operator} at {where} cannot be maintained{tail}")
