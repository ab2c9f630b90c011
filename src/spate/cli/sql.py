"""``spate sql <data-dir>``: an interactive SQL shell, or ``-c "…"`` for one command.

The shell behaves like psql: it reads statements over several lines until one ends with
``;``, keeps a history in ``~/.spate_sql_history`` (readline: arrows, Ctrl-R), prints rows as
tables (rich) with their count, a statement without rows as its command tag (``INSERT 0 3``,
``UPDATE 2``, ``CREATE TABLE``), and SUBSCRIBE changes as they come. Values are printed as
they are (never read as markup); NULL prints as nothing, or as what ``\\pset null 'X'`` says.
Ctrl-C cancels the running statement (or stops a SUBSCRIBE) and the shell goes on; ``\\q``
(or Ctrl-D) quits. ``\\?`` lists the backslash commands: ``\\timing``, ``\\d`` and its kinds.

A SUBSCRIBE change's time (the shell's own first column) is printed as a time,
``2026-11-24 13:37:16.181`` (UTC); the columns of a result are printed as their values.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import pyarrow as pa
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from spate.cli.app import app, settings
from spate.clock import format_ms
from spate.plan.evaluation.casts import float_text
from spate.sql.parse import split

if TYPE_CHECKING:
    from spate.cli.remote import RemoteRunner
    from spate.environment.operations import EnvironmentOperations
    from spate.environment.sql import SqlSession

HISTORY = Path.home() / ".spate_sql_history"
CANCELED: Final = "canceling statement due to user request"
"""PostgreSQL's message for a statement canceled by its client (SQLSTATE 57014)."""


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


def statements(text: str, dialect: str = "postgres") -> list[str]:
    """The ``;``-separated statements of ``text`` (the whole text if it does not split)."""
    try:
        return [src.sql for src, _ in split(text, dialect)]
    except Exception:  # the statement's own run reports the error
        return [text]


def render(table: pa.Table, null: str = "") -> Table:
    """A rich table of ``table``'s rows, each value as its text (NULL as ``null``)."""
    out = Table(show_lines=False, header_style="bold")
    for name in table.column_names:
        out.add_column(Text(name))
    columns = [
        _reals(table.column(i).to_pylist())
        if pa.types.is_float32(f.type)
        else table.column(i).to_pylist()
        for i, f in enumerate(table.schema)
    ]
    for i in range(table.num_rows):
        out.add_row(*(Text(null if c[i] is None else str(c[i])) for c in columns))
    out.caption = Text(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return out


def show(console: Console, result: Any, tag: str | None = None, null: str = "") -> None:
    """Print one statement's result: rows, a stream of changes, or its command tag (``OK``
    when there is none). Ctrl-C while a stream prints stops it."""
    if isinstance(result, pa.Table):
        console.print(render(result, null))
    elif isinstance(result, Iterator):
        try:
            for batch in result:
                for change_time, row, diff in batch:
                    cells = "\t".join(null if v is None else str(v) for v in row)
                    line = f"{format_ms(change_time)}\t{diff:+d}\t{cells}"
                    console.print(line, markup=False, highlight=False)
        except KeyboardInterrupt:
            console.print("Cancel request sent", markup=False, highlight=False)
        finally:
            with contextlib.suppress(Exception):
                result.close()  # type: ignore[attr-defined]
    else:
        console.print(tag or "OK", markup=False, highlight=False)


def _reals(values: list[object]) -> list[object]:
    """A ``real`` column's values as PostgreSQL prints them (``0.1``, not its double digits)."""
    return [float_text(v, single=True) if isinstance(v, float) else v for v in values]


def error(console: Console, message: object) -> None:
    """Print an error as psql does (``ERROR:  …``), its text as it is; an evaluation error
    as PostgreSQL's text, with spate's (the expression and the row) as its detail."""
    from spate.errors import EvaluationFailed

    if isinstance(message, EvaluationFailed) and message.pg_message != str(message):
        console.print(Text(f"ERROR:  {message.pg_message}", style="red"), highlight=False)
        console.print(Text(f"DETAIL:  {message}"), highlight=False)
        return
    console.print(Text(f"ERROR:  {message}", style="red"), highlight=False)
    detail = getattr(message, "detail", None)  # a server's error (spate.cli.remote)
    if isinstance(detail, str) and detail:
        console.print(Text(f"DETAIL:  {detail}"), highlight=False)


HELP: Final = """\
General
  \\q                     quit (as Ctrl-D does)
  \\?                     this help
  \\timing [on|off]       print how long each statement took (toggles without an argument)
  \\pset null [STRING]    print NULL as STRING (by default NULL prints as nothing)

Informational
  \\d                     list tables, views, materialized views, indexes, sources and sinks
  \\d NAME                describe relation NAME: its columns
  \\dt, \\dv, \\dm, \\di     list tables, views, materialized views, indexes

Statements end with ';'. Ctrl-C cancels the running statement (or stops a SUBSCRIBE).
Up/down arrows and Ctrl-R search the history (~/.spate_sql_history)."""

_LIST_KINDS: Final = {
    "\\d": ("table", "view", "materialized view", "index", "source", "subsource", "sink"),
    "\\dt": ("table",),
    "\\dv": ("view",),
    "\\dm": ("materialized view",),
    "\\di": ("index",),
}


@dataclass
class Shell:
    """The shell's state: where its statements run, how it prints, and its settings."""

    run: Callable[[str], Any]
    """Run one statement: its result (a table, a stream of changes, or ``None``)."""
    console: Console
    dialect: str = "postgres"
    tag: Callable[[str], str | None] = lambda sql: None
    """The command tag of a statement that just ran without rows (``INSERT 0 3``)."""
    env: EnvironmentOperations | None = None
    """The environment ``\\d`` describes (none: ``\\d`` says it has nothing to list)."""
    remote: RemoteRunner | None = None
    """The server the statements run on (``\\d`` asks it), when not an environment here."""
    null: str = ""
    timing: bool = False
    _buffer: list[str] = field(default_factory=list)

    def prompt(self) -> str:
        return "spate=> " if not self._buffer else "spate-> "

    def line(self, line: str) -> bool:
        """Take one input line; ``False`` when the shell should quit."""
        if not self._buffer and line.strip().startswith("\\"):
            return self.command(line.strip())
        if not self._buffer and line.strip() in ("quit", "exit"):
            return False
        self._buffer.append(line)
        text = "\n".join(self._buffer)
        if not text.strip():
            self._buffer.clear()
            return True
        if not complete(text, self.dialect):
            return True
        self._buffer.clear()
        for sql in statements(text, self.dialect):  # each on its own, as psql sends them
            self.statement(sql)
        return True

    def interrupt(self) -> None:
        """Ctrl-C at the prompt: forget the statement being typed (as psql does)."""
        self._buffer.clear()
        self.console.print()

    def statement(self, sql: str) -> bool:
        """Run one statement and print its result; ``False`` if it failed or was canceled."""
        start = time.perf_counter()
        try:
            try:
                result = self.run(sql)
                show(self.console, result, self.tag(sql) if result is None else None, self.null)
            except KeyboardInterrupt:
                self.console.print("Cancel request sent", markup=False, highlight=False)
                error(self.console, CANCELED)
                return False
            except Exception as e:  # every error is reported and the shell goes on
                error(self.console, e)
                return False
            return True
        finally:
            if self.timing:
                ms = (time.perf_counter() - start) * 1000
                self.console.print(f"Time: {ms:.3f} ms", markup=False, highlight=False)

    # -- backslash commands ----------------------------------------------------------------------

    def command(self, text: str) -> bool:
        name, _, rest = text.partition(" ")
        try:
            args = shlex.split(rest)
        except ValueError as e:
            error(self.console, f"{text}: {e}")
            return True
        if name in ("\\q", "\\quit"):
            return False
        if name in ("\\?", "\\h", "\\help"):
            self.console.print(HELP, markup=False, highlight=False)
        elif name == "\\timing":
            self.timing = _on_off(args[0], self.timing) if args else not self.timing
            self.console.print(f"Timing is {'on' if self.timing else 'off'}.", markup=False)
        elif name == "\\pset" and args and args[0] == "null":
            if len(args) > 1:
                self.null = args[1]
            self.console.print(Text(f'Null display is "{self.null}".'), highlight=False)
        elif name == "\\pset":
            error(self.console, "\\pset: only null is supported (\\pset null 'X')")
        elif name == "\\d" and args:
            self.describe(args[0])
        elif name in _LIST_KINDS:
            self.list_relations(_LIST_KINDS[name])
        else:
            error(self.console, f"invalid command {name}; try \\? for help")
        return True

    def _objects(self) -> list[tuple[str, str]]:
        """(name, kind) of every object, from the environment or the server."""
        from spate.environment.catalog import kind_of

        if self.remote is not None:
            table = self.remote.run("SHOW OBJECTS")
            assert isinstance(table, pa.Table)
            names, kinds = table.column("name").to_pylist(), table.column("type").to_pylist()
            return [(str(n), str(k)) for n, k in zip(names, kinds, strict=True)]
        items = [] if self.env is None else list(self.env.runtime.catalog)
        return [(i.name, kind_of(i)) for i in items]

    def list_relations(self, kinds: tuple[str, ...]) -> None:
        try:
            rows = sorted((name, kind) for name, kind in self._objects() if kind in kinds)
        except Exception as e:  # the server failed the listing: say so, the shell goes on
            error(self.console, e)
            return
        if not rows:
            self.console.print("Did not find any relations.", markup=False)
            return
        table = pa.table(
            {
                "Schema": ["public"] * len(rows),
                "Name": [n for n, _ in rows],
                "Type": [k for _, k in rows],
            }
        )
        out = render(table)
        out.title = Text("List of relations")
        self.console.print(out)

    def describe(self, name: str) -> None:
        from spate.environment.catalog import IndexItem, kind_of
        from spate.environment.sql import EnvironmentCatalog
        from spate.sql.declared import column_types

        if self.remote is not None:
            self._describe_remote(self.remote, name)
            return
        item = None if self.env is None else self.env.runtime.catalog.find(name)
        if self.env is None or item is None:
            self.console.print(Text(f'Did not find any relation named "{name}".'), highlight=False)
            return
        catalog = EnvironmentCatalog(self.env)
        key: tuple[str, ...] | None = None
        target = name
        if isinstance(item, IndexItem):
            obj = catalog.lookup(item.name)
            if obj is not None and obj.on is not None:
                target, key = obj.on, obj.key
        described = catalog.lookup(target)
        if described is None or described.desc is None:
            self.console.print(Text(f'{kind_of(item)} "{name}" has no columns'), highlight=False)
            return
        types = column_types(described)
        cols = [
            (c.name, str(t), "" if c.nullable else "not null")
            for c, t in zip(described.desc.columns, types, strict=True)
            if key is None or c.name in key
        ]
        table = pa.table(
            {
                "Column": [c for c, _, _ in cols],
                "Type": [t for _, t, _ in cols],
                "Nullable": [n for _, _, n in cols],
            }
        )
        out = render(table)
        out.title = Text(f'{kind_of(item).capitalize()} "public.{name}"')
        out.caption = None
        self.console.print(out)

    def _describe_remote(self, remote: RemoteRunner, name: str) -> None:
        kinds = dict(self._objects())
        if name not in kinds:
            self.console.print(Text(f'Did not find any relation named "{name}".'), highlight=False)
            return
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            found = remote.run(f"SHOW COLUMNS FROM {quoted}")
        except Exception as e:  # an object without columns (a sink…)
            self.console.print(Text(f'{kinds[name]} "{name}": {e}'), highlight=False)
            return
        assert isinstance(found, pa.Table)
        nullable = found.column("nullable").to_pylist()
        table = pa.table(
            {
                "Column": found.column("name"),
                "Type": found.column("type"),
                "Nullable": ["" if n in ("t", "true") else "not null" for n in nullable],
            }
        )
        out = render(table)
        out.title = Text(f'{kinds[name].capitalize()} "public.{name}"')
        out.caption = None
        self.console.print(out)


def _on_off(word: str, current: bool) -> bool:
    w = word.lower()
    if w in ("on", "true", "yes", "1"):
        return True
    if w in ("off", "false", "no", "0"):
        return False
    return current


def repl(shell: Shell, read: Callable[[str], str]) -> None:
    """Read lines with ``read`` (a prompt → line function) until EOF or ``\\q`` and give each
    to ``shell``; Ctrl-C at the prompt forgets the statement being typed."""
    while True:
        try:
            line = read(shell.prompt())
        except EOFError:
            shell.console.print()
            return
        except KeyboardInterrupt:
            shell.interrupt()
            continue
        try:
            if not shell.line(line):
                return
        except KeyboardInterrupt:  # between two statements of a line: stop there
            shell.console.print("Cancel request sent", markup=False, highlight=False)


def session_shell(
    session: SqlSession, console: Console, dialect: str = "postgres", env: Any = None
) -> Shell:
    """A shell running statements in ``session`` (tags with the rows each DML wrote)."""
    return Shell(
        run=lambda text: session.sql(text, dialect=dialect),
        console=console,
        dialect=dialect,
        tag=lambda text: session.session.tag or "",
        env=env if env is not None else session.env,
    )


@app.command()
def sql(
    data_dir: Annotated[Path, typer.Argument(help="the environment's data directory")],
    command: Annotated[
        str | None, typer.Option("-c", "--command", help="run these statements and exit")
    ] = None,
    dialect: Annotated[str, typer.Option(help="postgres or spark")] = "postgres",
) -> None:
    """An interactive SQL shell on an environment (or -c "…" for one command).

    When ``spate serve`` serves the data directory, the shell connects to that server (its
    password from PGPASSWORD, else asked for) instead of opening the environment a second
    time; otherwise it opens the environment itself."""
    from spate.cli.served import find

    console = Console()
    served = find(data_dir)
    if served is not None:
        if dialect != "postgres":
            raise typer.BadParameter("--dialect: a server runs postgres statements only")
        _remote_shell(served, console, data_dir, command)
        return
    from spate.environment.api import Environment

    env = Environment.open(data_dir, settings=settings(data_dir=data_dir))
    try:
        shell = session_shell(env.sql_session(), console, dialect)
        _run_shell(shell, console, command, f"spate SQL on {data_dir} ({dialect})")
    finally:
        env.close()


def _remote_shell(served: Any, console: Console, data_dir: Path, command: str | None) -> None:
    """The shell on the server ``served`` of ``data_dir``."""
    import getpass
    import os

    from spate.cli.remote import RemoteRunner, connect

    password = os.environ.get("PGPASSWORD") if served.password else None
    if served.password and password is None:
        password = getpass.getpass(f"Password for the server of {data_dir}: ")
    conn = connect(served.connect_host, served.port, password)
    try:
        runner = RemoteRunner(conn, notice=lambda m: console.print(Text(m), highlight=False))
        shell = Shell(run=runner.run, console=console, tag=runner.tag, remote=runner)
        where = f"the server of {data_dir} (port {served.port}, pid {served.pid})"
        _run_shell(shell, console, command, f"spate SQL on {where}")
    finally:
        conn.close()


def _run_shell(shell: Shell, console: Console, command: str | None, banner: str) -> None:
    if command is not None and command.strip().startswith("\\"):
        shell.command(command.strip())  # a backslash command, as with psql -c
        return
    if command is not None:
        for text in statements(command, shell.dialect):
            if not shell.statement(text):
                raise typer.Exit(1)
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # started where SIGINT is ignored (a background job of a script): at a terminal the
        # user's Ctrl-C is still theirs, to cancel the running statement, as psql takes it
        signal.signal(signal.SIGINT, signal.default_int_handler)
    console.print(
        Text(f"{banner}; statements end with ';', "),
        Text("\\? is help, \\q quits"),
        sep="",
        highlight=False,
    )
    with _history():
        repl(shell, input)


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
