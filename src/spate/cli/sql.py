"""``spate sql <data-dir>``: an interactive SQL shell, or ``-c "…"`` for one command.

The shell reads statements over several lines until one ends with ``;``, keeps a history in
``~/.spate_sql_history`` (readline: arrows, Ctrl-R), prints rows as tables (rich) and
SUBSCRIBE changes as they come (Ctrl-C stops them). ``\\q`` (or Ctrl-D) quits. spate's
timestamps (a change's time, ``spate_catalog``'s since and upper…) are printed as times,
``2026-11-24 13:37:16.181`` (UTC); what the API and pgwire return stays the number of
milliseconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Final

import pyarrow as pa
import typer
from rich.console import Console
from rich.table import Table

from spate.cli.app import app, settings
from spate.clock import format_ms
from spate.plan.evaluation.casts import float_text
from spate.sql.parse import split

HISTORY = Path.home() / ".spate_sql_history"


def complete(text: str, dialect: str = "postgres") -> bool:
    """Whether ``text`` ends a statement: it ends with ``;`` outside quotes and comments."""
    stripped = text.rstrip()
    if not stripped.endswith(";"):
        return False
    try:
        split(stripped, dialect)
    except Exception:  # an unterminated string or comment: keep reading
        return False
    return True


TIME_COLUMNS: Final = frozenset(
    {"mz_timestamp", "since", "upper", "committed_frontier", "requested_at", "timestamp"}
)
"""Integer columns with these names hold spate timestamps (milliseconds since the epoch, as
in ``spate_catalog``): the shell prints them as times; the value itself stays the number."""


def render(table: pa.Table) -> Table:
    """A rich table of ``table``'s rows (NULL shown as NULL, spate timestamps as times)."""
    out = Table(show_lines=False, header_style="bold")
    for name in table.column_names:
        out.add_column(name)
    columns = [
        _times(table.column(i).to_pylist())
        if f.name in TIME_COLUMNS and pa.types.is_integer(f.type)
        else _reals(table.column(i).to_pylist())
        if pa.types.is_float32(f.type)
        else table.column(i).to_pylist()
        for i, f in enumerate(table.schema)
    ]
    for i in range(table.num_rows):
        out.add_row(*("NULL" if c[i] is None else str(c[i]) for c in columns))
    out.caption = f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}"
    return out


def show(console: Console, result: Any) -> None:
    """Print one statement's result: rows, a stream of changes, or nothing."""
    if isinstance(result, pa.Table):
        console.print(render(result))
    elif isinstance(result, Iterator):
        try:
            for batch in result:
                for time, row, diff in batch:
                    line = f"{format_ms(time)}\t{diff:+d}\t" + "\t".join(map(_cell, row))
                    console.print(line, markup=False, highlight=False)
        except KeyboardInterrupt:
            console.print("(subscribe stopped)")
        finally:
            with contextlib.suppress(Exception):
                result.close()  # type: ignore[attr-defined]
    else:
        console.print("OK", style="green")


def _times(values: list[object]) -> list[object]:
    return [format_ms(v) if isinstance(v, int) and v > 0 else v for v in values]


def _reals(values: list[object]) -> list[object]:
    """A ``real`` column's values as PostgreSQL prints them (``0.1``, not its double digits)."""
    return [float_text(v, single=True) if isinstance(v, float) else v for v in values]


def _cell(v: object) -> str:
    return "NULL" if v is None else str(v)


def repl(
    run: Callable[[str], Any],
    read: Callable[[str], str],
    console: Console,
    dialect: str = "postgres",
) -> None:
    """Read statements with ``read`` (a prompt → line function) until EOF or ``\\q``, run each
    with ``run`` and print its result; an error prints and the shell goes on."""
    buffer: list[str] = []
    while True:
        try:
            line = read("spate=> " if not buffer else "spate-> ")
        except EOFError:
            return
        except KeyboardInterrupt:
            buffer.clear()
            console.print()
            continue
        if not buffer and line.strip() in ("\\q", "quit", "exit"):
            return
        buffer.append(line)
        text = "\n".join(buffer)
        if not text.strip():
            buffer.clear()
            continue
        if not complete(text, dialect):
            continue
        buffer.clear()
        try:
            show(console, run(text))
        except Exception as e:  # every error is reported and the shell goes on
            console.print(f"ERROR: {e}", style="red", markup=False, highlight=False)


@app.command()
def sql(
    data_dir: Annotated[Path, typer.Argument(help="the environment's data directory")],
    command: Annotated[
        str | None, typer.Option("-c", "--command", help="run these statements and exit")
    ] = None,
    dialect: Annotated[str, typer.Option(help="postgres or spark")] = "postgres",
) -> None:
    """An interactive SQL shell on an environment (or -c "…" for one command)."""
    from spate.environment.api import Environment

    console = Console()
    env = Environment.open(data_dir, settings=settings(data_dir=data_dir))
    try:
        if command is not None:
            try:
                show(console, env.sql(command, dialect=dialect))
            except Exception as e:
                console.print(f"ERROR: {e}", style="red", markup=False, highlight=False)
                raise typer.Exit(1) from None
            return
        console.print(f"spate SQL on {data_dir} ({dialect}); statements end with ';', \\q quits")
        with _history():
            repl(lambda text: env.sql(text, dialect=dialect), input, console, dialect)
    finally:
        env.close()


@contextlib.contextmanager
def _history() -> Iterator[None]:
    try:
        import readline
    except ImportError:  # no readline on this platform: no history
        yield
        return
    with contextlib.suppress(OSError):
        readline.read_history_file(HISTORY)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            readline.write_history_file(HISTORY)
