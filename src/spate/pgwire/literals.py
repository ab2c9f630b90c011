"""SQL literals of values (:func:`literal`: a Bind's values become typed literals).

This module writes SQL; it reads none. Statements are split, recognised and their ``$n`` found
by the SQL layer (:mod:`spate.pgwire.split`, :mod:`spate.sql.session_statements`).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any


def literal(value: Any, type_name: str | None = None) -> str:
    """``value`` as a SQL literal, cast to ``type_name`` when one is given."""
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "TRUE" if value else "FALSE"
    elif isinstance(value, int):
        text = str(value) if value >= 0 else f"({value})"
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            text = f"'{'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')}'"
            type_name = type_name or "float8"
        else:
            text = repr(value) if value >= 0 else f"({value!r})"
    elif isinstance(value, Decimal):
        text = format(value, "f")
        text = text if not text.startswith("-") else f"({text})"
    elif isinstance(value, bytes):
        text, type_name = "'\\x" + value.hex() + "'", type_name or "bytea"
    elif isinstance(value, dt.datetime):
        text, type_name = f"'{value.isoformat(' ')}'", type_name or "timestamp"
    elif isinstance(value, dt.date):
        text, type_name = f"'{value.isoformat()}'", type_name or "date"
    else:
        text = "'" + str(value).replace("'", "''") + "'"
    return f"CAST({text} AS {type_name})" if type_name else text
