"""The sorted keys of a reduce's accumulators (reduce_state._Positions) against a dict model,
under seeded random steps: touched keys found, some replaced (in place), some gone, new ones
added."""

from __future__ import annotations

import os
import random

import numpy as np

from spate.render.operators.reduce_state import _Positions

SEED = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))


def test_positions_match_a_dict_of_each_key_to_its_row() -> None:
    print(f"seed {SEED}: SPATE_TEST_SEED={SEED} pytest {__file__}")
    rng = np.random.default_rng(SEED)
    for _ in range(200):
        positions, model, next_row = _Positions(), dict[int, int](), 0
        for _ in range(20):
            touched = np.unique(rng.integers(0, 30, rng.integers(0, 10)))
            gone = positions.find(touched)
            assert sorted(positions.keys[gone].tolist()) == sorted(
                k for k in touched.tolist() if k in model
            )
            for k in touched.tolist():
                model.pop(k, None)
            kept = touched[rng.random(len(touched)) < 0.7]
            present = np.array([*model, *touched.tolist()], dtype=np.int64)
            new = np.setdiff1d(np.unique(rng.integers(0, 30, 3)), present)
            keys = np.concatenate([kept, new]).astype(np.int64)
            rng.shuffle(keys)
            rows = np.arange(next_row, next_row + len(keys), dtype=np.int64)
            next_row += len(keys)
            positions.replace(gone, keys, rows)
            model.update(zip(keys.tolist(), rows.tolist(), strict=True))
            assert positions.keys.tolist() == sorted(model)
            assert positions.rows.tolist() == [model[k] for k in positions.keys.tolist()]
