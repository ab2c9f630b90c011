"""Errors of the plan IR (defined in :mod:`spate.errors`, re-exported here).

Bad plans fail at construction, before anything runs: :class:`InvalidPlan` (and its
:class:`PlanColumnMissing` and :class:`PlanTypeError`), :class:`InvalidDataflow` for a dataflow
description whose parts do not fit together, :class:`EvalError` when a valid plan cannot be
evaluated on some data (raised by the reference evaluator; a renderer reports the same
conditions as dataflow errors).
"""

from __future__ import annotations

from spate.errors import EvalError as EvalError
from spate.errors import InvalidDataflow as InvalidDataflow
from spate.errors import InvalidPlan as InvalidPlan
from spate.errors import PlanColumnMissing as PlanColumnMissing
from spate.errors import PlanTypeError as PlanTypeError
