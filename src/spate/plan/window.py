"""Window functions: ``Window``, a relation that appends one column per window function.

``Window(input, partition_by, order_by, funcs, names, frames)`` is SQL's ``f(…) OVER
(PARTITION BY … ORDER BY … frame)`` for every ``f`` in ``funcs``, all sharing one partitioning
and one order, each with its own frame (a query with several partitionings or orders stacks
several nodes). Its output is the input's columns followed by one column per function, named
``names`` (default: the function's name)::

    Window(
        bids,
        partition_by=(0,),                                   # PARTITION BY auction
        order_by=(ColumnOrder(2, desc=True),),               # ORDER BY price DESC
        funcs=(WindowExpr(WindowFunc.ROW_NUMBER), AggregateExpr(AggregateFunc.SUM, ColumnRef(2))),
        names=("rn", "running"),
    )
    # or, with the builder:
    bids.window(["auction"], order_by=[desc("price")], rn=row_number(), running=sum_(col("price")))

**Semantics** (PostgreSQL's, with one deterministic choice where PostgreSQL leaves the order
unspecified; :mod:`spate.plan.evaluation.relation` is the executable definition):

* The input must have non-negative multiplicities (as for ``TopK``). A row of multiplicity
  ``n`` is ``n`` separate rows: each gets its own output row (``row_number`` numbers them
  ``k, k+1, …``), and identical output rows add up again.
* Rows are partitioned by the ``partition_by`` columns (NULLs equal, as ``Reduce`` groups); no
  columns: one partition, the whole input.
* Within a partition rows are ordered by ``order_by`` (PostgreSQL's NULL placement: last for
  ascending, first for descending, unless ``nulls_last`` says otherwise), **then by the whole
  input row ascending, NULLs last** — the tie-break ``TopK`` uses, so that ``row_number``,
  ``lag`` and ``lead`` are defined even among rows with equal ORDER BY values (PostgreSQL picks
  an arbitrary order there; a comparison with PostgreSQL must order totally or look only at
  functions of peers). *Peers* are rows whose ``order_by`` values are all equal (NULL equals
  NULL, NaN equals NaN, ``-0.0`` equals ``0.0``); without ``order_by`` every row of a partition
  is a peer of every other.

==================  ============================  ==============================================
function            type                          value for the row at position ``i`` (0-based)
==================  ============================  ==============================================
``row_number()``    int64 not null                ``i + 1``
``rank()``          int64 not null                1 + the number of rows before the row's first
                                                  peer (peers share it: 1, 1, 3)
``dense_rank()``    int64 not null                the number of distinct peer groups up to the
                                                  row's (1, 1, 2)
``lag(x, n, d)``    common type of ``x`` and      ``x`` of the row at ``i - n`` in the
                    ``d``                         partition; ``d`` (evaluated on the current
                                                  row; default NULL) when there is none
``lead(x, n, d)``   the same                      ``x`` of the row at ``i + n``; else ``d``
``first_value(x)``  ``x``'s                       ``x`` of the frame's first row (default
                                                  frame: the partition's first)
``last_value(x)``   ``x``'s                       ``x`` of the frame's last row (default: the
                                                  row's last peer, in the tie-broken order)
``nth_value(x, n)`` ``x``'s, nullable             ``x`` of the frame's ``n``-th row; NULL when
                                                  the frame has fewer rows
``ntile(b)``        int64 not null                the row's bucket 1…b: ``N`` rows in ``b``
                                                  buckets by position, the first ``N mod b``
                                                  buckets one row larger
``percent_rank()``  float64 not null              ``(rank - 1) / (N - 1)``; 0 when ``N = 1``
``cume_dist()``     float64 not null              (rows up to the row's last peer) / ``N``
aggregate           as in ``Reduce``              the aggregate over the row's *frame*
==================  ============================  ==============================================

``N`` is the partition's number of rows. ``n`` (held in ``WindowExpr.offset``, like ``b``) is a
constant int: ``lag(x, -n)`` is ``lead(x, n)`` and ``n = 0`` the row's own ``x``; ``nth_value``
and ``ntile`` need ``n, b >= 1``.
Aggregates are ``count`` (``count(*)`` is ``count(TRUE)``), ``sum``, ``avg``, ``min``, ``max``,
``bool_and``, ``bool_or`` and ``string_agg`` without ``distinct`` (PostgreSQL has no DISTINCT in
window aggregates), typed as in ``Reduce`` (:mod:`spate.plan.aggregate`: ``sum(int64)`` is int64
and ``avg(int64)`` float64, where PostgreSQL answers numeric; a SQL front end wanting
PostgreSQL's types casts the argument to numeric first), except that ``string_agg`` joins the
frame's values **in the frame's order** (``Reduce`` sorts them).

**Frames.** The aggregates and ``first_value``/``last_value``/``nth_value`` read the row's
*frame*, the function's in ``frames`` (:class:`WindowFrame`, one per function: SQL's
``ROWS``/``RANGE BETWEEN … AND …``; the other functions' are settled to the default). The
frames differ per function but the order does not: the node sorts each partition once and every
function reads the row's one position in it, as PostgreSQL evaluates all the functions of one
ordering in one pass. So over identical rows at positions ``k`` and ``k + 1`` one output row
holds every function's value at ``k`` and the other every function's at ``k + 1``; two stacked
nodes would not (the second node's tie-break reads the first's values, which differ between
the identical rows, and pairs them from different positions). ``ROWS`` counts positions in
the total order (``ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING``: the row and its neighbours);
``RANGE`` bounds are UNBOUNDED or CURRENT ROW, which is the row's first peer as a start and its
last peer as an end. The default is
PostgreSQL's: with ``order_by``, ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`` — the
partition's rows up to the row's **last peer**, so ``sum(x) OVER (ORDER BY y)`` over ``(x, y) =
(1, 1), (2, 1), (3, 2)`` is 3, 3, 6; without ``order_by``, the whole partition (every row is a
peer). A frame that need not hold the row itself (``ROWS BETWEEN 1 FOLLOWING AND 2
FOLLOWING``) may be empty: ``count`` is then 0 and the other functions NULL, and their columns
are nullable. The other functions ignore the frame.

**Maintenance.** A renderer recomputes every partition a change touches (the keyed operators'
approach), so the cost of a change follows its partition's size; without ``partition_by`` every
change recomputes the whole input (``explain()`` says so). ``SELECT … WHERE rn <= k`` over a
``row_number()`` is cheaper as a ``TopK`` with the same order (same tie-break, same rows).

The node is defined with the other relational nodes in :mod:`spate.plan.relation` (its fluent
method builds it), the functions in :mod:`spate.plan.window_func`; both are importable from here.
"""

from __future__ import annotations

from spate.plan.relation import Window
from spate.plan.window_func import (
    DEFAULT_FRAME,
    WINDOW_AGGREGATES,
    FrameMode,
    WindowCall,
    WindowExpr,
    WindowFrame,
    WindowFunc,
    cume_dist,
    dense_rank,
    first_value,
    lag,
    last_value,
    lead,
    nth_value,
    ntile,
    percent_rank,
    range_between,
    rank,
    reads_frame,
    row_number,
    rows_between,
    show_call,
)

__all__ = [
    "DEFAULT_FRAME",
    "WINDOW_AGGREGATES",
    "FrameMode",
    "Window",
    "WindowCall",
    "WindowExpr",
    "WindowFrame",
    "WindowFunc",
    "cume_dist",
    "dense_rank",
    "explain_line",
    "first_value",
    "lag",
    "last_value",
    "lead",
    "nth_value",
    "ntile",
    "percent_rank",
    "range_between",
    "rank",
    "reads_frame",
    "row_number",
    "rows_between",
    "show_call",
]


def explain_line(node: Window) -> str:
    """The node's line in :func:`spate.plan.explain.explain`."""
    return node.explain_line(node.input.desc.names)
