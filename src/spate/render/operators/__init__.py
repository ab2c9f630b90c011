"""Operators: how each plan node turns its inputs' deltas into its output delta.

:func:`spate.render.operators.build.build_node` compiles a plan into a tree of nodes; each node's
``step(ctx)`` returns its output delta for the step's interval ``[ctx.lo, ctx.hi)`` as a lazy
Spark DataFrame. Stateless operators (``linear``) transform DataFrames; stateful ones (``join``,
``keyed``, ``temporal``) keep arrangements and materialize what they must keep. State changes
are registered with ``ctx.on_commit`` and applied only after every Spark action of the step has
run, so a failed step changes nothing and can be retried.
"""
