"""Compile a plan (``RelationExpr``) into a tree of operator nodes."""

from __future__ import annotations

import itertools

from spate.ids import GlobalId
from spate.plan.recursive import Recursive
from spate.plan.relation import (
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    FlatMap,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from spate.plan.window import Window
from spate.render.operators.capture import capturing, window_arguments
from spate.render.operators.join import JoinNode
from spate.render.operators.join_history import attach
from spate.render.operators.keyed import KeyedNode
from spate.render.operators.linear import (
    ConstantNode,
    FilterNode,
    FlatMapNode,
    GetNode,
    MapNode,
    NegateNode,
    PassNode,
    ProjectNode,
    UnionNode,
)
from spate.render.operators.node import Node
from spate.render.operators.recursive import RecursiveNode
from spate.render.operators.recursive import reads as recursive_reads
from spate.render.operators.temporal import TemporalFilterNode
from spate.render.operators.window import WindowNode


class Builder:
    """Builds the nodes of one dataflow; remembers temporal filters (their pending updates
    decide whether an otherwise idle step has work)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.temporal: list[TemporalFilterNode] = []
        self.demand: dict[GlobalId, set[int] | None] = {}
        """The columns of each collection read by a ``Get`` that the plans use: a ``Get``
        under a ``Project`` uses the projected columns; any other, all (``None``)."""
        self._n = itertools.count()

    def _demand(self, id: GlobalId, columns: set[int] | None) -> None:
        if id in self.demand:
            known = self.demand[id]
            self.demand[id] = None if known is None or columns is None else known | columns
        else:
            self.demand[id] = columns

    def build(self, plan: RelationExpr) -> Node:
        name = f"{self.name}-{next(self._n)}"
        match plan:
            case Get(id, desc):
                self._demand(id, None)
                return GetNode(id, desc)
            case Project(Get(id, desc), outputs, _):
                self._demand(id, set(outputs))
                return ProjectNode(GetNode(id, desc), outputs, plan.desc)
            case Constant(rows, desc):
                return ConstantNode(rows, desc)
            case Map(inp, scalars, _):
                return MapNode(self.build(inp), scalars, plan.desc)
            case Filter(inp, predicates):
                if plan.is_temporal():
                    bounds = plan.temporal_bounds()
                    exprs = (*bounds.predicates, *bounds.lower, *bounds.upper)
                    node = TemporalFilterNode(capturing(self.build(inp), exprs), bounds, plan.desc)
                    self.temporal.append(node)
                    return node
                return FilterNode(self.build(inp), predicates, plan.desc)
            case Project(inp, outputs, _):
                return ProjectNode(self.build(inp), outputs, plan.desc)
            case FlatMap(inp, func, exprs, _):
                return FlatMapNode(capturing(self.build(inp), exprs), func, exprs, plan.desc)
            case Join(operands, equivalences, predicates):
                return JoinNode(
                    tuple(self.build(o) for o in operands),
                    equivalences,
                    predicates,
                    plan.desc,
                    name,
                    plan.input_offsets(),
                )
            case Reduce(inp, key, aggregates, _):
                built = self.build(inp)
                return KeyedNode(
                    built,
                    "reduce",
                    key,
                    plan.desc,
                    name,
                    aggregates=aggregates,
                    joined=attach(built, key),
                )
            case TopK(inp, key, order_by, limit, offset):
                built = self.build(inp)
                return KeyedNode(
                    built,
                    "topk",
                    key,
                    plan.desc,
                    name,
                    order_by=order_by,
                    limit=limit,
                    offset=offset,
                    joined=attach(built, key),
                )
            case Window(inp, partition_by, order_by, funcs, _, frames):
                built = self.build(inp)
                return WindowNode(
                    capturing(built, window_arguments(funcs)),
                    "window",
                    partition_by,
                    plan.desc,
                    name,
                    order_by=order_by,
                    joined=attach(built, partition_by),
                    funcs=funcs,
                    frames=frames,
                )
            case Distinct(inp):
                return KeyedNode(
                    self.build(inp), "distinct", tuple(range(inp.desc.arity)), plan.desc, name
                )
            case Threshold(inp):
                return KeyedNode(
                    self.build(inp), "threshold", tuple(range(inp.desc.arity)), plan.desc, name
                )
            case Negate(inp):
                return NegateNode(self.build(inp), plan.desc)
            case Union(operands):
                return UnionNode(tuple(self.build(o) for o in operands), plan.desc)
            case ArrangeBy(inp, _):
                return PassNode(self.build(inp), plan.desc)
            case Recursive():
                collections = recursive_reads(plan)
                for id in collections:
                    self._demand(id, None)
                return RecursiveNode(plan, plan.desc, collections, _build_fresh, name)
        raise TypeError(f"cannot render {type(plan).__name__}")


def _build_fresh(name: str, plan: RelationExpr) -> Node:
    """``plan``'s nodes, fresh (a recursive node's round)."""
    return Builder(name).build(plan)
