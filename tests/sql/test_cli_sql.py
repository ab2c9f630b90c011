"""The ``spate sql`` shell: statement buffering, results, errors (no environment needed)."""

from __future__ import annotations

import io
import re

import pyarrow as pa
from rich.console import Console

from spate.cli.sql import Shell, complete, repl
from spate.sql import SqlError


def test_a_statement_ends_with_a_semicolon_outside_quotes() -> None:
    assert complete("SELECT 1;")
    assert not complete("SELECT 1")
    assert not complete("SELECT ';")
    assert complete("SELECT ';';  ")


def test_shell_runs_multi_line_statements_and_survives_errors() -> None:
    lines = iter(["SELECT 1", "  AS one;", "SELEC 2;", "", "SELECT 3;", "\\q", "SELECT 4;"])
    ran: list[str] = []

    def run(text: str) -> object:
        ran.append(text)
        if text.startswith("SELEC "):
            raise SqlError("syntax error at or near SELEC", position=1, text=text)
        return pa.table({"one": [1]})

    out = io.StringIO()
    repl(Shell(run, Console(file=out, width=80)), lambda prompt: next(lines))
    assert ran == ["SELECT 1\n  AS one", "SELEC 2", "SELECT 3"]
    text = out.getvalue()
    assert "ERROR:  syntax error at or near SELEC" in text
    assert "one" in text and "(1 row)" in text


def test_an_evaluation_error_prints_postgres_text_then_spate_detail() -> None:
    from spate.cli.sql import error
    from spate.errors import EvaluationFailed

    console = Console(file=io.StringIO(), width=300, color_system=None)
    e = EvaluationFailed(
        "query: division by zero evaluating (1 / 0) on row () [SQLSTATE 22012]",
        "22012",
        "division by zero",
    )
    error(console, e)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "ERROR:  division by zero"
    assert lines[1].startswith("DETAIL:  query: division by zero evaluating (1 / 0)")
    assert e.pg_message == "division by zero"


def test_statements_of_one_line_run_one_by_one_and_go_on_after_an_error() -> None:
    ran: list[str] = []

    def run(text: str) -> object:
        ran.append(text)
        if text == "SELECT 1/0":
            raise SqlError("division by zero")
        return None

    out = io.StringIO()
    shell = Shell(run, Console(file=out, width=80), tag=lambda sql: sql.split()[0].upper())
    lines = iter(["CREATE TABLE t (a int); SELECT 1/0; DROP TABLE t;", "\\q"])
    repl(shell, lambda prompt: next(lines))
    assert ran == ["CREATE TABLE t (a int)", "SELECT 1/0", "DROP TABLE t"]
    assert out.getvalue().splitlines() == ["CREATE", "ERROR:  division by zero", "DROP"]


def test_backslash_commands_set_null_display_and_timing_and_refuse_others() -> None:
    out = io.StringIO()
    shell = Shell(lambda text: pa.table({"v": [None]}), Console(file=out, width=80))
    lines = iter(["\\pset null '(nil)'", "\\timing on", "SELECT NULL;", "\\pset format", "\\x"])
    repl(shell, lambda prompt: next(lines, "\\q"))
    text = out.getvalue()
    assert 'Null display is "(nil)".' in text and "Timing is on." in text
    assert "(nil)" in text.split("Timing is on.")[1] and re.search(r"Time: \d+\.\d{3} ms", text)
    assert "ERROR:  \\pset: only null is supported" in text
    assert "ERROR:  invalid command \\x; try \\? for help" in text
