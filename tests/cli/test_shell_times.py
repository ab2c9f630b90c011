"""The ``spate sql`` shell prints values as they are: a SUBSCRIBE change's time (the shell's
own column) is printed as a time, a result's columns are not, whatever their names."""

from __future__ import annotations

import io

import pyarrow as pa
from rich.console import Console

from spate.cli.sql import render, show
from spate.clock import format_ms


def _printed(result: object, null: str = "") -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    show(console, result, null=null)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_format_ms_is_utc_with_milliseconds() -> None:
    assert format_ms(1_795_693_373_504) == "2026-11-26 11:42:53.504"
    assert format_ms(7) == "1970-01-01 00:00:00.007"


def test_columns_named_like_timestamps_print_their_values() -> None:
    table = pa.table(
        {
            "name": ["t"],
            "since": pa.array([1_795_693_370_000], pa.int64()),
            "upper": pa.array([3], pa.int64()),
            "timestamp": pa.array([None], pa.int64()),
        }
    )
    text = _printed(table)
    assert "1795693370000" in text and " 3 " in text
    assert "1970" not in text and "2026" not in text
    assert "NULL" not in text  # NULL prints as nothing, as in psql
    assert render(table).row_count == 1


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


def test_values_print_literally_never_as_markup() -> None:
    table = pa.table({"[b]h[/b]": ["[x]", "[/oops]", "[bold]b[/bold]", None]})
    text = _printed(table)
    for literal in ("[b]h[/b]", "[x]", "[/oops]", "[bold]b[/bold]"):
        assert literal in text


def test_null_prints_as_the_null_display_and_differs_from_the_text_null() -> None:
    table = pa.table({"v": ["NULL", None]})
    lines = [line.strip("│ ") for line in _printed(table, null="(null)").splitlines()]
    assert "NULL" in lines and "(null)" in lines
    plain = [line.strip("│ ") for line in _printed(table).splitlines()]
    assert plain.count("NULL") == 1 and "" in plain
