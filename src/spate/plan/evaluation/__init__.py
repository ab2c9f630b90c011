"""What a plan means, evaluated in plain Python.

* :mod:`spate.plan.evaluation.relation` — :func:`evaluate`: a relational plan on given input
  contents at one time;
* :mod:`spate.plan.evaluation.scalar` — scalar expressions (:func:`compile_scalar`);
  :mod:`spate.plan.evaluation.casts` — ``CAST``; :mod:`spate.plan.evaluation.values` —
  canonical datums, their order and range checks.

The environment reads small results with it where no dataflow is needed; the tests check the
renderer against it.
"""
