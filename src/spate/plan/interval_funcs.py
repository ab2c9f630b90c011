"""The interval functions among :class:`~spate.plan.expr.VariadicFunc`: their signatures and
PostgreSQL's meaning (the reference evaluator's :mod:`spate.plan.evaluation.interval` and the
Spark compiler's :mod:`spate.render.interval` implement them).

An interval datum is :class:`~spate.repr.interval.Interval` (months, days, microseconds). The
IR's ``=`` and hashing of interval columns (a group key, a join key, a row in a collection)
are those of the stored fields; the SQL planner makes PostgreSQL's comparisons and identity
(by the span, ``'1 mon' = '30 days'``) out of these functions:

* ``interval_months``, ``interval_days``, ``interval_micros``: the fields, as int64;
  ``make_interval(months, days, micros)`` builds one (months and days beyond int32: 22008).
* ``interval_key(i)``: the span in microseconds (numeric(38,0)), what comparisons compare.
* ``interval_canon(i)``: the span's representative (:func:`spate.repr.interval.canonical`),
  the value grouping, ``DISTINCT``, set operations and join keys use; ``interval_of_key(n)``
  the canonical interval of a span (what ``min`` and ``max``, taken over the spans, give).
* ``interval_mul(i, f)`` / ``interval_div(i, f)``: PostgreSQL 15's ``interval * float8`` and
  ``interval / float8`` (fractions cascade down: months into days of 30, days into time);
  out of range 22008, division by zero 22012.
* ``interval_epoch(i)``: ``extract(epoch from i)``, numeric(38,6): a year of 365.25 days, a
  month of 30, a day of 24 hours.
* ``interval_text(i)``: ``i::text``, as PostgreSQL prints it (``IntervalStyle = postgres``).
* ``justify_days(i)``, ``justify_hours(i)``, ``justify_interval(i)``: PostgreSQL 15's
  (whole 30-day months out of the days, whole days out of the time, both; the parts then
  share a sign); months or days beyond int32: 22008.
* ``interval_of_text(t)``: ``t::interval`` of a text at run time, in the form
  :mod:`spate.repr.interval_input` reads (others: 0A000).
* ``timestamp_add_us(ts, n)``: ``ts`` plus ``n`` microseconds (beyond years 1..9999: 22008).
"""

from __future__ import annotations

from typing import Final

from spate.plan.func_names import VariadicFunc
from spate.repr.types import INT64, INTERVAL, TEXT, TIMESTAMP, ScalarKind, ScalarType, numeric

V = VariadicFunc
_IV, _I, _F = ScalarKind.INTERVAL, ScalarKind.INT64, ScalarKind.FLOAT64

KEY_TYPE: Final = numeric(38, 0)
EPOCH_TYPE: Final = numeric(38, 6)

INTERVAL_SIGNATURES: Final[
    dict[VariadicFunc, tuple[tuple[tuple[ScalarKind, ...], ...], ScalarType]]
] = {
    V.INTERVAL_MONTHS: (((_IV,),), INT64),
    V.INTERVAL_DAYS: (((_IV,),), INT64),
    V.INTERVAL_MICROS: (((_IV,),), INT64),
    V.INTERVAL_KEY: (((_IV,),), KEY_TYPE),
    V.INTERVAL_CANON: (((_IV,),), INTERVAL),
    V.INTERVAL_OF_KEY: (((ScalarKind.NUMERIC,),), INTERVAL),
    V.INTERVAL_MUL: (((_IV, _F),), INTERVAL),
    V.INTERVAL_DIV: (((_IV, _F),), INTERVAL),
    V.INTERVAL_EPOCH: (((_IV,),), EPOCH_TYPE),
    V.INTERVAL_TEXT: (((_IV,),), TEXT),
    V.TIMESTAMP_ADD_US: (((ScalarKind.TIMESTAMP, _I),), TIMESTAMP),
    V.JUSTIFY_DAYS: (((_IV,),), INTERVAL),
    V.JUSTIFY_HOURS: (((_IV,),), INTERVAL),
    V.JUSTIFY_INTERVAL: (((_IV,),), INTERVAL),
    V.INTERVAL_OF_TEXT: (((ScalarKind.TEXT,),), INTERVAL),
}
