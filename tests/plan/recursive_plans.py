"""Recursive plans over small graphs, shared by the evaluator and the renderer's oracle tests:
transitive closure (UNION: ends on cycles), a counter up to the limits in a table (UNION ALL)
and a walk down a tree (UNION ALL, depth-bounded)."""

from __future__ import annotations

from spate.ids import GlobalId
from spate.plan import col, lit
from spate.plan.recursive import Recursive, RecursiveRef
from spate.plan.relation import Constant, Get, Join, RelationExpr
from spate.repr import INT64, RelationDesc

EDGES_ID = GlobalId.user(11)
LIMITS_ID = GlobalId.user(12)
TREE_ID = GlobalId.user(13)
EDGES_DESC = RelationDesc.of(("src", INT64, True), ("dst", INT64, True))
LIMITS_DESC = RelationDesc.of(("n", INT64, True))
TREE_DESC = RelationDesc.of(("id", INT64, False), ("parent", INT64, True))
EDGES = Get(EDGES_ID, EDGES_DESC)
LIMITS = Get(LIMITS_ID, LIMITS_DESC)
TREE = Get(TREE_ID, TREE_DESC)
INPUTS = {EDGES_ID: EDGES_DESC, LIMITS_ID: LIMITS_DESC, TREE_ID: TREE_DESC}

PAIRS = RelationDesc.of(("a", INT64, True), ("b", INT64, True))


def closure(*, distinct: bool = True, max_iterations: int = 10_000) -> Recursive:
    """Every (a, b) with a path from a to b."""
    ref = RecursiveRef(0, PAIRS)
    step = Join((ref, EDGES), ((1, 2),)).project("a", "dst").rename(dst="b")
    return Recursive(
        EDGES.rename(src="a", dst="b"), step, 0, distinct, max_iterations=max_iterations
    )


def counter() -> Recursive:
    """1, 2, … up to each limit n (UNION ALL: once per limit above the number)."""
    one = Constant((((1,), 1),), RelationDesc.of(("i", INT64, True)))
    ref = RecursiveRef(1, RelationDesc.of(("i", INT64, True)))
    step = (
        Join((ref, LIMITS))
        .filter(col("i") < col("n"))
        .select(next=col("i") + lit(1))
        .rename(next="i")
    )
    return Recursive(one, step, 1, False)


def tree_walk() -> Recursive:
    """(node, depth) for every node below a root (parent NULL), at most 4 levels down."""
    roots = TREE.filter(col("parent").is_null()).select("id", depth=lit(0))
    ref = RecursiveRef(2, RelationDesc.of(("id", INT64, True), ("depth", INT64, True)))
    step = (
        Join((ref, TREE), ((0, 3),))
        .filter(col("depth") < lit(4))
        .select(2, below=col("depth") + lit(1))
        .rename(id_1="id", below="depth")
    )
    return Recursive(roots, step, 2, False)


def guarded() -> Recursive:
    """1, 2, … while some limit is above the number (UNION), and a term that yields 42 when
    the working table is empty: PostgreSQL stops before evaluating the term on an empty
    working table, so 42 never appears (a renderer that ran the term once more would add
    it)."""
    i = RelationDesc.of(("i", INT64, True))
    ref = RecursiveRef(3, i)
    more = (
        Join((ref, LIMITS))
        .filter(col("i") < col("n"))
        .select(next=col("i") + lit(1))
        .rename(next="i")
    )
    c42 = Constant((((42,), 1),), i)
    when_empty = c42.union(Join((c42, ref.project().distinct()), ()).project(0).negate())
    one = Constant((((1,), 1),), i)
    return Recursive(one, more.union(when_empty), 3, True)


def reachable_count() -> RelationExpr:
    """How many nodes each node reaches: an aggregate over the closure."""
    from spate.plan import count

    return closure().reduce(["a"], n=count())


PLANS = {
    "closure": closure(),
    "counter": counter(),
    "tree_walk": tree_walk(),
    "reachable_count": reachable_count(),
    "guarded": guarded(),
}
