"""Spark SQL spellings rewritten, right after parsing, into the forms the planner knows.

Each rewrite keeps Spark's meaning exactly:

* ``nvl2(x, a, b)``: ``CASE WHEN x IS NOT NULL THEN a ELSE b END``;
* ``count_if(p)``: ``count(CASE WHEN p THEN 1 END)`` (the rows where ``p`` is true; 0 over
  none);
* ``CAST(x AS t)``: the strict cast, as in Spark 4 (ANSI mode, its default): a value that does
  not convert fails the statement (sqlglot reads Spark's ``CAST`` as a lax ``TRY_CAST``, as
  Spark 3 without ANSI mode had it); ``TRY_CAST`` stays the lax one (NULL where it fails);
* ``a LEFT SEMI JOIN b ON c``: the rows of ``a`` with a match, ``… WHERE EXISTS (SELECT 1 FROM
  b WHERE c)``, and ``LEFT ANTI JOIN`` the rows without one, ``NOT EXISTS`` (a row whose ``c``
  is NULL for every row of ``b`` has no match, as in Spark), so that both become the semijoin
  and antijoin of a decorrelated ``EXISTS``.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["spark_to_postgres"]


def spark_to_postgres(tree: exp.Expression) -> exp.Expression:
    """``tree`` with the Spark-only forms above rewritten (in place; positions kept)."""
    for node in list(tree.find_all(exp.Nvl2, exp.CountIf)):
        node.replace(_rewritten(node))
    for cast in list(tree.find_all(exp.TryCast)):
        if not cast.args.get("safe"):  # Spark's CAST, not TRY_CAST
            strict = exp.Cast(this=cast.this, to=cast.args["to"])
            strict.meta.update(cast.meta)
            cast.replace(strict)
    for select in list(tree.find_all(exp.Select)):
        _semi_anti_joins(select)
    return tree


def _rewritten(node: exp.Func) -> exp.Expression:
    if isinstance(node, exp.Nvl2):
        present = exp.Not(this=exp.Is(this=node.this, expression=exp.Null()))
        when = exp.If(this=present, true=node.args["true"])
        return exp.Case(ifs=[when], default=node.args.get("false"))
    when = exp.If(this=exp.Paren(this=node.this), true=exp.Literal.number(1))
    return exp.Count(this=exp.Case(ifs=[when]))


def _semi_anti_joins(select: exp.Select) -> None:
    for join in list(select.args.get("joins") or []):
        kind = str(join.args.get("kind") or "").upper()
        on = join.args.get("on")
        if kind not in ("SEMI", "ANTI") or on is None:
            continue
        sub = exp.Select(expressions=[exp.Literal.number(1)])
        sub.set("from", exp.From(this=join.this))
        sub.set("where", exp.Where(this=on))
        cond: exp.Expression = exp.Exists(this=sub)
        if kind == "ANTI":
            cond = exp.Not(this=cond)
        join.pop()
        where = select.args.get("where")
        if where is not None:
            cond = exp.And(this=exp.Paren(this=where.this), expression=cond)
        select.set("where", exp.Where(this=cond))
