"""Inserting an Arrow table or a pandas DataFrame into a table (no replicas): checked against
the table's columns as a whole, written as it is; bad input is refused naming the column and
row, and nothing is written."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.errors import SchemaMismatch
from spate.repr import FLOAT64, INT64, TEXT, RelationDesc

BIDS = RelationDesc.of(("auction", INT64, False), ("price", INT64, False), ("who", TEXT))
READINGS = RelationDesc.of(("id", INT64, False), ("v", FLOAT64))


def rows(env: Environment, name: str) -> Counter:
    return Counter(tuple(r.values()) for r in env.select(name).to_pylist())


def test_an_arrow_table_and_a_dataframe_are_inserted_like_rows(env: Environment) -> None:
    env.create_table("bids", BIDS)
    arrow = pa.table({"auction": [1, 1], "price": [10, 25], "who": ["ann", None]})
    result = env.insert("bids", arrow)
    assert result.rows == 2
    # Columns in another order, narrower integer types: matched by name, cast safely.
    df = pd.DataFrame({"who": ["bo", None], "price": np.array([7, 8], dtype=np.int32)})
    df.insert(0, "auction", [2, 2])
    assert env.insert("bids", df[["price", "who", "auction"]]).rows == 2
    assert rows(env, "bids") == Counter(
        {(1, 10, "ann"): 1, (1, 25, None): 1, (2, 7, "bo"): 1, (2, 8, None): 1}
    )
    # What was inserted as a table can be deleted and updated as rows.
    env.delete("bids", [(1, 25, None)])
    env.update("bids", [((2, 8, None), (2, 9, None))])
    assert rows(env, "bids") == Counter({(1, 10, "ann"): 1, (2, 7, "bo"): 1, (2, 9, None): 1})


def test_null_in_a_non_null_column_or_a_wrong_column_is_refused_and_writes_nothing(
    env: Environment,
) -> None:
    env.create_table("bids", BIDS)
    env.insert("bids", [(1, 10, "ann")])
    nulls = pa.table({"auction": [3, 4, None], "price": [1, 2, 3], "who": ["a", "b", "c"]})
    with pytest.raises(SchemaMismatch) as e:
        env.insert("bids", nulls)
    assert e.value.column == "auction" and e.value.row_index == 2
    df = pd.DataFrame({"auction": [3, 4], "price": pd.array([1, None], dtype="Int64"), "who": "x"})
    with pytest.raises(SchemaMismatch) as e:
        env.insert("bids", df)
    assert e.value.column == "price" and e.value.row_index == 1
    with pytest.raises(SchemaMismatch) as e:
        env.insert("bids", pa.table({"auction": [3], "price": [1], "whom": ["a"]}))
    with pytest.raises(SchemaMismatch) as e:
        env.insert("bids", pa.table({"auction": [3], "price": ["cheap"], "who": ["a"]}))
    assert e.value.column == "price"
    with pytest.raises(SchemaMismatch) as e:
        env.insert("bids", pd.DataFrame({"auction": [3, 4], "price": [1, 2], "who": ["a", 5]}))
    assert e.value.column == "who"
    assert rows(env, "bids") == Counter({(1, 10, "ann"): 1})


def test_floats_have_one_identity_and_a_dataframe_nan_is_a_value(env: Environment) -> None:
    env.create_table("readings", READINGS)
    df = pd.DataFrame({"id": [1, 2, 3], "v": [-0.0, float("nan"), 1.5]})
    env.insert("readings", df)
    env.insert("readings", pa.table({"id": [4], "v": pa.array([None], pa.float64())}))
    got = {r["id"]: r["v"] for r in env.select("readings").to_pylist()}
    assert got[1] == 0.0 and math.copysign(1.0, got[1]) == 1.0  # -0.0 is 0.0
    assert math.isnan(got[2]) and got[3] == 1.5 and got[4] is None  # NaN is not NULL
    # Rows given as Python values find them: the same identity on both paths.
    assert env.delete("readings", [(1, 0.0), (2, float("nan"))]).rows == 2
    assert sorted(r["id"] for r in env.select("readings").to_pylist()) == [3, 4]


def test_rows_are_not_columnar_while_pandas_is_half_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another thread may be importing pandas (seen with the collection manager's thread):
    the module is in sys.modules without DataFrame yet; a list of rows is still rows."""
    import sys
    import types

    from spate.environment.tables import is_columnar

    table = pa.table({"a": [1]})
    monkeypatch.setitem(sys.modules, "pandas", types.ModuleType("pandas"))
    assert not is_columnar([(1, "a")])
    assert is_columnar(table)
