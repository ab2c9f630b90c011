"""Test support shipped with spate: the reference oracle, strategies and replica drivers.

* :mod:`spate.testing.reference` — what a whole dataflow must produce at every time, by the
  plain-Python evaluation of :mod:`spate.plan.evaluation` (the oracle for "incremental output
  at every time == recomputation");
* :mod:`spate.testing.plan_strategies` — random well-typed plans and input update streams;
* :mod:`spate.testing.strategies` — value types (frontiers, scalar types, rows);
* :mod:`spate.testing.replica_driver`, :mod:`spate.testing.replica_checks`,
  :mod:`spate.testing.replica_launch` — drive a compute replica over the protocol, check its
  obligations on every response, start one as a process.

Nothing here serves users, and nothing in the rest of the package imports it; it is the
oracle, the generators and the drivers that the test suite, the benchmarks and downstream
renderers check themselves against.
"""
