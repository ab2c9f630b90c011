"""Running a corpus file through spate (``Environment.sql``) beside PostgreSQL.

Each record runs on both engines in file order (PostgreSQL in a scratch schema); every query's
rows are compared (:mod:`tests.sql._slt_compare`), every statement must succeed or fail on
both. Then the incremental check: each query that can define a view (PostgreSQL accepts it as
a view over the file's tables) becomes a materialized view with a default index in spate and a
view in PostgreSQL. A query that reads views the file created reads them as they were defined
when it ran, recreated (renamed) in both engines first, with any table under them the file
dropped (holding the rows it had then; :mod:`tests.sql._slt_deps`). Seeded random rounds of
INSERT/UPDATE/DELETE (:mod:`tests.sql._slt_dml`) go to the tables of both, and after each round
every view read through spate must equal PostgreSQL's answer on the same data (an error in
PostgreSQL must be an error in spate).

Knobs (environment variables):

- ``SPATE_SLT_SEED``: the seed of the rounds and of the view sample (printed; set it to replay).
  Unset (or ``random``), each run draws a fresh one, so that successive runs of the suite check
  other views, rounds and dataflow reads and together cover the whole corpus; ``fixed`` uses
  ``FIXED_SEED``;
- ``SPATE_SLT_ROUNDS``: rounds per file (default 5);
- ``SPATE_SLT_VIEWS``: views per file (default ``DEFAULT_VIEWS``, drawn from the seed); ``all``
  maintains every query that can define a view;
- ``SPATE_SLT_SOAK_VIEWS``: views per file the soak (a slow test) maintains among those the
  suite's draw leaves out (default ``DEFAULT_SOAK_VIEWS``, the CI size); ``all`` maintains
  every one of them, so that the suite and the soak together check every view-able query;
- ``SPATE_SLT_DATAFLOW_READS``: queries per file (default ``DEFAULT_DATAFLOW_READS``, drawn from
  the seed) read a second time through a session that never evaluates a read in the
  environment, and compared with PostgreSQL's rows again; ``all`` sends every query.

The corpus's one-off reads are small, so the environment evaluates them itself
(:mod:`spate.environment.small_reads`): the second read of the drawn queries builds the one-off
dataflow on the replica, so that the renderer answers them too. ``SPATE_SMALL_READ_UPDATES=0``
sends every read of the corpus to a dataflow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
import pyarrow as pa

from tests.sql._slt import Record, SltFile, format_rows
from tests.sql._slt_compare import compare, table_rows, type_problem
from tests.sql._slt_deps import Closure, Definitions
from tests.sql._slt_dml import apply_to_postgres, load, random_round, spate_rows
from tests.sql._slt_pg import PgScratch

if TYPE_CHECKING:
    from spate.environment.api import Environment
    from spate.environment.sql import SqlSession

CLUSTER = "slt"
DEFAULT_VIEWS = 2
DEFAULT_ROUNDS = 5
DEFAULT_DATAFLOW_READS = 3
DEFAULT_SOAK_VIEWS = 1
# Each run of the suite draws its own views, rounds and dataflow reads (the seed is printed, and
# set again replays them): a fixed draw would check the same few views of each file forever.
FIXED_SEED = 20261126


@functools.cache
def _run_seed() -> int:
    """This run's seed: drawn once, so that the suite's tests and the soak (which takes the
    views the suite's draw left out) agree on the draw."""
    return random.SystemRandom().randrange(2**32)


@dataclass(frozen=True)
class Knobs:
    seed: int
    rounds: int
    views: int | None  # None: every viewable query
    dataflow_reads: int | None = DEFAULT_DATAFLOW_READS  # None: every query
    soak: int | None = None
    """``None``: maintain the views drawn by ``views``; else the views that draw leaves out
    instead (a sample of ``soak`` of them, 0: all)."""

    @staticmethod
    def from_env() -> Knobs:
        seed_text = (os.environ.get("SPATE_SLT_SEED") or "random").strip().lower()
        if seed_text == "random":
            seed = _run_seed()
        elif seed_text == "fixed":
            seed = FIXED_SEED
        else:
            seed = int(seed_text)
        rounds = int(os.environ.get("SPATE_SLT_ROUNDS", DEFAULT_ROUNDS))
        views_text = os.environ.get("SPATE_SLT_VIEWS", str(DEFAULT_VIEWS)).strip().lower()
        views = None if views_text == "all" else int(views_text)
        reads_text = os.environ.get("SPATE_SLT_DATAFLOW_READS", str(DEFAULT_DATAFLOW_READS))
        reads = None if reads_text.strip().lower() == "all" else int(reads_text)
        return Knobs(seed, rounds, views, reads)

    def soaking(self) -> Knobs:
        """The knobs of the soak (``test_slt``'s slow test): the views the suite's draw leaves
        out, ``SPATE_SLT_SOAK_VIEWS`` of them per file (default ``DEFAULT_SOAK_VIEWS``, the
        CI size; ``all`` maintains every one), no second reads."""
        text = os.environ.get("SPATE_SLT_SOAK_VIEWS", str(DEFAULT_SOAK_VIEWS)).strip().lower()
        soak = 0 if text == "all" else max(int(text), 1)
        return dataclasses.replace(self, dataflow_reads=0, soak=soak)

    def replay(self) -> str:
        views = "all" if self.views is None else self.views
        reads = "all" if self.dataflow_reads is None else self.dataflow_reads
        out = (
            f"SPATE_SLT_SEED={self.seed} SPATE_SLT_ROUNDS={self.rounds} SPATE_SLT_VIEWS={views}"
            f" SPATE_SLT_DATAFLOW_READS={reads}"
        )
        if self.soak is not None:
            out += f" SPATE_SLT_SOAK_VIEWS={self.soak or 'all'}"
        return out


@dataclass
class FileResult:
    problems: dict[str, str | None] = field(default_factory=dict)  # record key -> problem
    incremental: dict[str, str | None] = field(default_factory=dict)  # query key -> problem
    not_maintained: dict[str, str] = field(default_factory=dict)  # query key -> why not
    names: dict[str, list[str]] = field(default_factory=dict)  # query key -> spate's columns
    seconds: float = 0.0
    views: int = 0
    dataflow_reads: int = 0


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _spate_error(e: BaseException) -> bool:
    from spate.errors import SpateError

    return isinstance(e, SpateError)


def run_file(f: SltFile, env: Environment, pg_url: str, knobs: Knobs) -> FileResult:
    started = time.monotonic()
    result = FileResult()
    before = set(env.names())
    dataflow = _dataflow_session(env)
    drawn = _dataflow_draw(f, knobs)
    defs = Definitions()
    try:
        with PgScratch(pg_url, f.path.stem) as pg:
            for r in f.records:
                on_pg = r.runs_on("postgresql")
                for table in defs.dropping(r) if on_pg else []:
                    _keep_rows(pg, defs, table)
                if r.runs_on("spate"):
                    via = dataflow if r.key in drawn else None
                    result.problems[r.key] = _run_record(r, env, pg, result, via)
                elif on_pg:
                    _pg_side(r, pg)
                if on_pg:
                    defs.ran(r)
            if knobs.rounds > 0:
                _incremental(f, env, pg, knobs, result, defs)
    finally:
        _drop_new(env, before)
    result.seconds = time.monotonic() - started
    return result


def _keep_rows(pg: PgScratch, defs: Definitions, table: str) -> None:
    """Keep the rows of a table the next statement drops (its maintained views recreate it)."""
    assert pg.conn is not None
    with contextlib.suppress(psycopg.Error):  # not there: nothing to keep
        defs.dropped[table] = [tuple(r) for r in pg.conn.execute(f"SELECT * FROM {table}")]


def _pg_side(r: Record, pg: PgScratch) -> tuple[list[Any] | None, str | None]:
    """PostgreSQL's rows (for a query) and its error, if any."""
    try:
        if r.kind == "query":
            return pg.query(r.sql)[2], None
        pg.execute(r.sql)
        return None, None
    except (psycopg.Error, ValueError) as e:
        return None, _error_text(e)


def _dataflow_session(env: Environment) -> SqlSession:
    """A session on the corpus cluster whose reads always build their dataflow."""
    session = env.sql_session()
    session.session.small_reads = False
    session.sql(f"SET cluster = {CLUSTER}")
    return session


def _dataflow_draw(f: SltFile, knobs: Knobs) -> set[str]:
    """The keys of the queries read a second time through a dataflow."""
    keys = [r.key for r in f.queries() if r.runs_on("spate") and r.runs_on("postgresql")]
    if knobs.dataflow_reads is None or len(keys) <= knobs.dataflow_reads:
        return set(keys)
    return set(random.Random(f"{knobs.seed}:{f.name}:reads").sample(keys, knobs.dataflow_reads))


def _run_record(
    r: Record, env: Environment, pg: PgScratch, result: FileResult, dataflow: SqlSession | None
) -> str | None:
    """The problem with spate's answer to ``r``, if any; a query is read a second time
    through ``dataflow`` (a session that builds every read's dataflow), if given."""
    problem = _answer(r, env, pg, result)
    if problem is None and dataflow is not None and r.kind == "query" and not r.expect_error:
        result.dataflow_reads += 1
        problem = _answer(r, dataflow, pg, result)
        if problem is not None:
            problem = f"read through a dataflow: {problem}"
    return problem


def _answer(
    r: Record, env: Environment | SqlSession, pg: PgScratch, result: FileResult
) -> str | None:
    pg_rows, pg_error = _pg_side(r, pg) if r.runs_on("postgresql") else (None, None)
    pg_types = list(pg.last_oids)
    try:
        out = env.sql(r.sql)
    except Exception as e:
        if r.expect_error:
            if _spate_error(e):
                return None
            return f"refused, but not with a spate error: {_error_text(e)}"
        return f"spate failed: {_error_text(e)}"
    if r.expect_error:
        return f"spate accepted a statement PostgreSQL refuses ({pg_error})"
    if r.kind == "statement":
        return None
    if pg_error is not None:
        return f"PostgreSQL failed: {pg_error}"
    if not isinstance(out, pa.Table):
        return f"spate returned {type(out).__name__} for a query, not a table"
    result.names[r.key] = list(out.column_names)
    if not r.runs_on("postgresql"):  # spate-only SQL: the file's rows are the expectation
        got = format_rows(table_rows(out), r.sort)
        return None if got == r.expected else f"rows {got!r}, the file says {r.expected!r}"
    return compare(pg_rows or [], out, ordered=r.sort == "nosort") or type_problem(
        pg_types, out.schema
    )


# -- incremental -----------------------------------------------------------------------------------


def _view_sql(pg: PgScratch, query: str, spate_names: list[str] | None) -> str:
    """The query as a view definition: columns renamed c1..cn when names repeat (in either
    engine: the engines name unnamed expressions differently)."""
    _, names, _ = pg.query(query)
    unique = len(set(names)) == len(names)
    if unique and (spate_names is None or len(set(spate_names)) == len(spate_names)):
        return query
    cols = ", ".join(f"c{i + 1}" for i in range(len(names)))
    return f"SELECT * FROM ({query}) AS q({cols})"


# Tables under a view: through the views it reads, transitively.
_READS_A_TABLE = """
WITH RECURSIVE used(name) AS (
  SELECT table_name FROM information_schema.view_table_usage
  WHERE view_schema = %(s)s AND view_name = %(v)s
  UNION
  SELECT u.table_name FROM information_schema.view_table_usage u JOIN used
  ON u.view_schema = %(s)s AND u.view_name = used.name
)
SELECT count(*) FROM used JOIN information_schema.tables t
ON t.table_schema = %(s)s AND t.table_name = used.name AND t.table_type = 'BASE TABLE'
"""


@dataclass
class _Maintained:
    record: Record
    name: str  # the view's name in both engines
    sql: str  # its definition
    closure: Closure  # the views it reads (created first), the dropped tables under it

    def describe(self) -> str:
        reads = "".join(f"\n  reading {new}: {stmt}" for new, stmt in self.closure.views)
        return f"{self.sql}{reads}"


def _pg_recreate(pg: PgScratch, closure: Closure, defs: Definitions, made: dict[str, str]) -> str:
    """Create, in PostgreSQL, the dropped tables (with the rows they held) and the renamed
    views ``closure`` reads, those not made yet; the first error (else ""). ``made``: what
    was made, name -> "" or its error."""
    assert pg.conn is not None
    for table in closure.tables:
        if table not in made:
            made[table] = ""
            try:
                pg.execute(defs.tables[table])
                rows = defs.dropped[table]
                if rows:
                    marks = ", ".join(["%s"] * len(rows[0]))
                    with pg.conn.cursor() as cur:
                        cur.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            except (psycopg.Error, KeyError) as e:
                made[table] = f"the dropped table {table}: {_error_text(e)}"
        if made[table]:
            return made[table]
    for new, statement in closure.views:
        if new not in made:
            made[new] = ""
            try:
                pg.execute(statement)
            except psycopg.Error as e:
                made[new] = f"the view it reads, {new}: {_error_text(e)}"
        if made[new]:
            return made[new]
    return ""


def _maintainable(
    f: SltFile, pg: PgScratch, result: FileResult, defs: Definitions
) -> tuple[list[_Maintained], list[str]]:
    """The queries PostgreSQL accepts as a view over the file's tables (as they are at the
    end of the file), with the views they read (as defined when the query ran, recreated),
    and the dropped tables recreated in PostgreSQL for them (spate must recreate them too)."""
    assert pg.conn is not None
    out: list[_Maintained] = []
    made: dict[str, str] = {}
    for i, r in enumerate(f.queries()):
        if not (r.runs_on("spate") and r.runs_on("postgresql")):
            continue
        if r.noview:
            result.not_maintained[r.key] = "marked noview"
            continue
        name = f"slt_v{i}"
        closure = defs.closure(r)
        try:
            if problem := _pg_recreate(pg, closure, defs, made):
                result.not_maintained[r.key] = f"not a view in PostgreSQL: {problem}"
                continue
            sql = _view_sql(pg, closure.sql, result.names.get(r.key))
            pg.execute(f"CREATE VIEW {name} AS {sql}")
        except (psycopg.Error, ValueError) as e:
            result.not_maintained[r.key] = f"not a view in PostgreSQL: {_error_text(e)}"
            continue
        used = pg.conn.execute(_READS_A_TABLE, {"s": pg.schema, "v": name}).fetchone()
        if not used or not used[0]:
            pg.execute(f"DROP VIEW {name}")
            result.not_maintained[r.key] = "reads no table"
            continue
        out.append(_Maintained(r, name, sql, closure))
    recreated = [t for t in defs.dropped if made.get(t) == ""]
    return out, recreated


def _spate_recreate(
    env: Environment, pg: PgScratch, tables: list[str], defs: Definitions
) -> str | None:
    """Create the dropped tables PostgreSQL recreated in spate too, with the same rows."""
    for table in tables:
        try:
            env.sql(defs.tables[table])
            model = load(pg, [table])[table]
            if model.rows:
                env.insert(table, spate_rows(model, model.rows))
        except Exception as e:
            return f"spate cannot recreate the dropped table {table}: {_error_text(e)}"
    return None


def _incremental(
    f: SltFile,
    env: Environment,
    pg: PgScratch,
    knobs: Knobs,
    result: FileResult,
    defs: Definitions,
) -> None:
    candidates, recreated = _maintainable(f, pg, result, defs)
    rng = random.Random(f"{knobs.seed}:{f.name}")
    chosen = candidates
    if knobs.views is not None and len(candidates) > knobs.views:
        chosen = sorted(rng.sample(candidates, knobs.views), key=lambda c: c.name)
    if knobs.soak is not None:
        # the views the draw above left out: all of them, or a sample of their own
        rest = [c for c in candidates if all(c.record is not d.record for d in chosen)]
        chosen = rest
        if knobs.soak > 0 and len(rest) > knobs.soak:
            soak_rng = random.Random(f"{knobs.seed}:{f.name}:soak")
            chosen = sorted(soak_rng.sample(rest, knobs.soak), key=lambda c: c.name)
    for c in candidates:
        if all(c.record is not d.record for d in chosen):
            result.not_maintained[c.record.key] = (
                f"not drawn this run (seed {knobs.seed}; SPATE_SLT_VIEWS=all runs all)"
            )
    # the rounds write to every table PostgreSQL holds: spate's must be the same
    broken = _spate_recreate(env, pg, recreated, defs)
    made: dict[str, str] = {}  # renamed views read by the maintained ones -> "" or the error
    live: dict[str, tuple[Record, str]] = {}
    for c in chosen:
        r = c.record
        if result.problems.get(r.key):
            result.incremental[r.key] = "the query itself fails in spate (see its own test)"
            continue
        if broken:
            result.incremental[r.key] = broken
            continue
        if problem := _spate_views(env, c.closure, made):
            result.incremental[r.key] = problem
            continue
        try:
            env.sql(f"CREATE MATERIALIZED VIEW {c.name} IN CLUSTER {CLUSTER} AS {c.sql}")
            env.sql(f"CREATE DEFAULT INDEX IN CLUSTER {CLUSTER} ON {c.name}")
        except Exception as e:
            result.incremental[r.key] = f"spate cannot maintain it: {_error_text(e)}"
            continue
        result.incremental[r.key] = None
        live[c.name] = (r, c.describe())
    result.views = len(live)
    if not live:
        return
    models = load(pg, pg.tables())
    _check_views(env, pg, live, result, "the initial contents")
    clear_round = rng.randrange(knobs.rounds)
    for n in range(knobs.rounds):
        rnd, ops = random_round(rng, models, clear=n == clear_round)
        apply_to_postgres(pg, models, ops)
        try:
            for table, (gone, new) in sorted(rnd.changes.items()):
                if gone:
                    env.delete(table, spate_rows(models[table], list(gone.elements())))
                if new:
                    env.insert(table, spate_rows(models[table], list(new.elements())))
        except Exception as e:
            for r, _ in live.values():
                result.incremental[r.key] = f"round {n + 1}: the write failed: {_error_text(e)}"
            return
        what = f"round {n + 1} of {knobs.rounds} ({knobs.replay()}):\n    " + "\n    ".join(
            rnd.description
        )
        _check_views(env, pg, live, result, what)


def _spate_views(env: Environment, closure: Closure, made: dict[str, str]) -> str:
    """Create, in spate, the renamed views ``closure`` reads, those not made yet; the first
    error (else "")."""
    for new, statement in closure.views:
        if new not in made:
            made[new] = ""
            try:
                env.sql(statement)
            except Exception as e:
                made[new] = f"spate cannot create the view it reads, {new}: {_error_text(e)}"
        if made[new]:
            return made[new]
    return ""


def _check_views(
    env: Environment,
    pg: PgScratch,
    live: dict[str, tuple[Record, str]],
    result: FileResult,
    when: str,
) -> None:
    for name, (r, sql) in list(live.items()):
        pg_rows: list[Any] | None = None
        pg_types: list[int] = []
        pg_error = None
        try:
            pg_rows = pg.query(f"SELECT * FROM {name}")[2]
            pg_types = list(pg.last_oids)
        except (psycopg.Error, ValueError) as e:
            pg_error = _error_text(e)
        try:
            out = env.sql(f"SELECT * FROM {name}")
        except Exception as e:
            problem = None if pg_error else f"spate's read failed: {_error_text(e)}"
        else:
            if pg_error:
                problem = f"PostgreSQL errs ({pg_error}), spate answered"
            else:
                problem = compare(pg_rows or [], out, ordered=False) or type_problem(
                    pg_types, out.schema
                )
        if problem:
            result.incremental[r.key] = f"after {when}\n  view: {sql}\n  {problem}"
            del live[name]


def _drop_new(env: Environment, before: set[str]) -> None:
    """Drop what the file created (dependents first, through CASCADE on tables)."""
    for _ in range(3):
        fresh = sorted(set(env.names()) - before)
        if not fresh:
            return
        for name in fresh:
            try:
                env.drop(name, cascade=True)
            except Exception:  # already dropped by a cascade; the next pass retries
                continue


def format_result(f: SltFile, result: FileResult) -> str:
    bad = sum(1 for p in result.problems.values() if p)
    inc_bad = sum(1 for p in result.incremental.values() if p)
    return (
        f"{f.name}: {len(result.problems)} records ({bad} differ), {result.views} views "
        f"maintained ({inc_bad} differ), {result.dataflow_reads} reads through a dataflow, "
        f"{result.seconds:.1f} s"
    )


def warm_up(env: Environment) -> None:
    """Wait (up to 5 minutes) until the cluster's replica answers from a dataflow it built, and
    make it the session's cluster: the first Spark job of a fresh replica takes a minute on a
    small machine. (An index is peeked once the replica hydrated it; a small one-off read
    would be answered without the replica.)"""
    from spate.repr import INT64, RelationDesc

    env.create_table("slt_warm_up", RelationDesc.of(("x", INT64)))
    try:
        env.create_index("slt_warm_up_idx", on="slt_warm_up", key=["x"], cluster=CLUSTER)
        env.select("slt_warm_up", cluster=CLUSTER, timeout=300)
    finally:
        env.drop("slt_warm_up", cascade=True)
    env.sql(f"SET cluster = {CLUSTER}")
