"""The ``spate sql`` shell prints spate's timestamps as times; the values stay numbers."""

from __future__ import annotations

import io

import pyarrow as pa
from rich.console import Console

from spate.cli.sql import render, show
from spate.clock import format_ms


def _printed(result: object) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    show(console, result)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_format_ms_is_utc_with_milliseconds() -> None:
    assert format_ms(1_795_693_373_504) == "2026-11-26 11:42:53.504"
    assert format_ms(7) == "1970-01-01 00:00:00.007"


def test_timestamp_columns_print_as_times_and_others_as_numbers() -> None:
    table = pa.table(
        {
            "name": ["t"],
            "since": pa.array([1_795_693_370_000], pa.int64()),
            "upper": pa.array([None], pa.int64()),
            "lag_ms": pa.array([1_795_693_370_000], pa.int64()),
        }
    )
    text = _printed(table)
    assert "2026-11-26 11:42:50.000" in text  # since
    assert "1795693370000" in text  # lag_ms is not a time
    assert "NULL" in text
    assert render(table).row_count == 1
    assert table.column("since").to_pylist() == [1_795_693_370_000]  # unchanged


def test_subscribe_changes_print_their_time_as_a_time() -> None:
    changes = iter([[(1_795_693_373_504, ("a", 1), 1), (1_795_693_373_505, ("a", 1), -1)]])
    lines = [line.split() for line in _printed(changes).splitlines()]  # rich expands tabs
    assert lines == [
        ["2026-11-26", "11:42:53.504", "+1", "a", "1"],
        ["2026-11-26", "11:42:53.505", "-1", "a", "1"],
    ]


def test_real_columns_print_their_single_precision_digits() -> None:
    table = pa.table({"r": pa.array([0.1, None, 1e20], pa.float32()), "d": [0.1, 0.2, 0.3]})
    text = _printed(table)
    assert "0.1 " in text and "1e+20" in text and "0.10000000149" not in text
