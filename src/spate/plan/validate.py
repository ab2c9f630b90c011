"""Kept so that older imports work: dataflow validation is
:func:`spate.plan.dataflow.validate_dataflow`."""

from __future__ import annotations

from spate.plan.dataflow import fits as fits
from spate.plan.dataflow import validate_dataflow as validate_dataflow
