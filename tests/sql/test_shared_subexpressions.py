"""Lowered SQL shares subexpressions: a checked float operation (22003 on overflow) repeats its
operands, so ``a + b + c …`` of n checked operations is a tree of about 4^n nodes but a DAG of
n. Typing and compiling it must take each shared node once (a corpus query of a dozen float
operations took 37 s to compile node by node)."""

from __future__ import annotations

import pytest

from spate.plan.evaluation.scalar import compile_scalar
from spate.plan.expr import BinaryFunc, CallBinary, Case, Literal, ScalarExpr
from spate.plan.infer import typ
from spate.repr.types import BOOL, FLOAT64


def _shared(levels: int) -> ScalarExpr:
    """A DAG of ``levels`` nodes that is a tree of 3^levels."""
    e: ScalarExpr = Literal(1.0, FLOAT64)
    for _ in range(levels):
        e = Case(((CallBinary(BinaryFunc.EQ, e, e), e),), Literal(None, FLOAT64))
    return e


@pytest.mark.timeout(60)
def test_a_shared_subexpression_is_typed_and_compiled_once() -> None:
    deep = _shared(60)  # 3^60 nodes as a tree: never done node by node
    assert typ(deep, []).type == FLOAT64
    assert compile_scalar(deep, []) is not None
    small = _shared(4)
    assert compile_scalar(small, [])((), 0) == 1.0
    assert typ(CallBinary(BinaryFunc.EQ, small, small), []).type == BOOL
