"""SQL transaction blocks (``BEGIN`` … ``COMMIT``/``ROLLBACK``), with Materialize's rules.

A block is one of three kinds, set by its first statement (SET and SHOW of a variable, SHOW
CREATE, EXPLAIN and the other statements that read no data do not count, and run at once):

* **read** (SELECT, SUBSCRIBE, or ``BEGIN READ ONLY``): every SELECT of the block without
  ``AS OF`` reads at one timestamp, the one chosen at its first read, so the block sees one
  state of every object (held back from compaction until the block ends:
  :mod:`.read_holds`). A write in a read block is refused: ``25006`` *transaction in
  read-only mode*.
* **write** (INSERT, UPDATE, DELETE): the writes are buffered (:mod:`.transaction`) and
  written at COMMIT, all at one timestamp, or none of them. An UPDATE or DELETE reads the
  table's committed rows when it runs (it does not see the block's own writes, so one of a
  table the block already wrote is refused: ``0A000``); the rows it removes are checked again at
  COMMIT, and if another writer removed them meanwhile COMMIT fails with ``40001`` and nothing
  is written. A read in a write block is refused: ``25000`` *transaction in write-only mode*.
* **DDL** (CREATE, DROP, ALTER, COMMENT): the block holds that statement, checked when it runs
  and carried out at COMMIT; ROLLBACK discards it. After it, the block takes renames, comments
  and views (``CREATE VIEW``), which COMMIT carries out in one catalog commit
  (:mod:`.sql_ddl_block`); any other statement is refused: ``25000``.

``SAVEPOINT``, ``RELEASE`` and ``ROLLBACK TO`` work as in PostgreSQL: a rollback to a savepoint
restores the block's buffered writes (and its kind) as they were then; the block's read
timestamp stays.

A statement that fails puts the block in the failed state: every statement but COMMIT,
ROLLBACK and ROLLBACK TO is refused with ``25P02`` *current transaction is aborted, commands
ignored until end of transaction block*, and COMMIT rolls back. A COMMIT that fails ends the
block too, with nothing of it written.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from spate.environment.sql_ddl_block import is_noop, is_pure
from spate.environment.sql_state import Block, Session
from spate.errors import RowsNotFound
from spate.sql import statements as st
from spate.sql.errors import SqlError

if TYPE_CHECKING:
    from spate.environment.operations import EnvironmentOperations

_NEUTRAL = (st.SetVariable, st.ShowVariable, st.ShowObjects, st.Rows)
"""Statements that read no data: they run at once in any block and do not set its kind."""
_READS = (st.Select, st.Subscribe)
_WRITES = (st.Insert, st.Update, st.Delete)


def savepoint(session: Session, what: str, name: str) -> None:
    """``SAVEPOINT name``, ``RELEASE name`` or ``ROLLBACK TO name``, as PostgreSQL does them:
    a rollback to a savepoint restores what the block held then (and ends its failed state),
    keeping the savepoint; a release forgets it and every later one."""
    block = session.block
    if block is None:
        raise SqlError(f"{what} can only be used in transaction blocks", sqlstate="25P01")
    if what == "SAVEPOINT":
        block.savepoints.append((name, (block.writes.snapshot(), block.kind, list(block.ddl))))
        return
    at = next(
        (i for i in reversed(range(len(block.savepoints))) if block.savepoints[i][0] == name), None
    )
    if at is None:
        raise SqlError(f'savepoint "{name}" does not exist', sqlstate="3B001")
    if what == "RELEASE":
        del block.savepoints[at:]
        return
    del block.savepoints[at + 1 :]
    writes, block.kind, ddl = block.savepoints[at][1]
    block.ddl = list(ddl)
    block.writes.restore(writes)
    block.failed = False


def aborted() -> SqlError:
    return SqlError(
        "current transaction is aborted, commands ignored until end of transaction block",
        sqlstate="25P02",
    )


def begin(env: EnvironmentOperations, session: Session, *, read_only: bool) -> None:
    """Open a block (one already open stays, as in PostgreSQL, which only warns); ``BEGIN READ
    ONLY`` opens a read block."""
    if session.block is None:
        session.block = Block(env.transaction(), kind="read" if read_only else None)


def rollback(session: Session) -> None:
    """End the block, discarding everything in it (no block: nothing to do)."""
    block, session.block = session.block, None
    if block is not None:
        _release(block)
        block.writes.rollback()


def _release(block: Block) -> None:
    if block.holds is not None:
        block.holds.release()


def admit(env: EnvironmentOperations, stmt: st.Statement, block: Block) -> st.Statement:
    """The statement as the block runs it, once the block's rules allow it: a SELECT gets the
    block's read timestamp. Raises the SQLSTATE of a statement the block refuses."""
    if isinstance(stmt, _NEUTRAL):
        return stmt
    kind = "read" if isinstance(stmt, _READS) else "write" if isinstance(stmt, _WRITES) else "ddl"
    if block.kind == "ddl":
        if kind == "ddl" and (is_pure(stmt) or all(is_noop(s) for s in block.ddl)):
            return stmt  # one more catalog change, committed with the others
        raise SqlError(
            "a transaction block with a DDL statement can hold no other statement but renames, "
            "comments and views (CREATE VIEW), which COMMIT carries out with it",
            sqlstate="25000",
        )
    if kind == "ddl" and block.kind is not None:
        raise SqlError(
            f"a DDL statement cannot run in a {block.kind} transaction block: "
            "it must be the only statement of its block",
            sqlstate="25000",
        )
    if kind == "write" and block.kind == "read":
        raise SqlError("transaction in read-only mode", sqlstate="25006")
    if kind == "read" and block.kind == "write":
        raise SqlError("transaction in write-only mode", sqlstate="25000")
    if isinstance(stmt, (st.Update, st.Delete)) and stmt.table in block.writes.tables():
        what = "UPDATE" if isinstance(stmt, st.Update) else "DELETE"
        raise SqlError(
            f"{what} of table {stmt.table}, which this transaction block already wrote, is "
            "not supported (it would not see the block's own writes)",
            sqlstate="0A000",
        )
    block.kind = kind
    if isinstance(stmt, st.Select) and stmt.as_of is None:
        if block.read_ts is None:
            block.read_ts = env.runtime.oracle.read_ts()
            block.holds = env._read_holds(block.read_ts)
        return dataclasses.replace(stmt, as_of=block.read_ts)
    return stmt


def commit(session: Session) -> tuple[bool, list[st.Statement]]:
    """End the block: write what it buffered (all or nothing). Returns whether it committed
    (``False``: it had failed and was rolled back) and the DDL statements the caller still has
    to carry out (:mod:`.sql_ddl_block`)."""
    block, session.block = session.block, None
    if block is None:
        return True, []
    _release(block)
    if block.failed:
        block.writes.rollback()
        return False, []
    if block.kind == "ddl":
        return True, list(block.ddl)
    try:
        block.writes.commit()
    except RowsNotFound as e:
        raise SqlError(
            f"could not serialize access due to concurrent update: {e}", sqlstate="40001"
        ) from e
    return True, []
