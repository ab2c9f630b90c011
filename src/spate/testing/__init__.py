"""Test support shipped with spate: the reference evaluator and hypothesis strategies.

* :mod:`spate.testing.reference` — what every plan means, evaluated in plain Python (the oracle
  for "incremental output at every time == recomputation");
* :mod:`spate.testing.reference_scalar` — the reference semantics of scalar expressions;
* :mod:`spate.testing.plan_strategies` — random well-typed plans and input update streams;
* :mod:`spate.testing.strategies` — value types (frontiers, scalar types, rows).

Nothing here serves users; it is the oracle and the generators that the test suite and
downstream renderers check themselves against.
"""
