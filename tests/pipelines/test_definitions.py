"""Loading a pipeline as ``spark-pipelines`` does, and translating it; no environment, no Spark
server: the spec, the graph the real ``pyspark.pipelines`` decorators register, the Spark SQL
each dataset becomes, and the errors a dry run reports (dataset, operator, line)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.pipelines import (
    DefinitionError,
    NotMaintainable,
    SpecError,
    load_pipeline,
    load_spec,
)
from spate.pipelines.graph import Dataset, DatasetKind, Flow, Graph, Location
from spate.pipelines.sql_files import split_statements
from tests.pipelines._example import Inputs, write_pipeline


def _pipeline(root: Path, py: str = "", sql: str = "") -> Path:
    (root / "t").mkdir(parents=True)
    (root / "data").mkdir()
    pq.write_table(pa.table({"k": [1, 2], "v": ["a", "b"]}), root / "data" / "f.parquet")
    if py:
        (root / "t" / "defs.py").write_text(textwrap.dedent(py))
    if sql:
        (root / "t" / "defs.sql").write_text(textwrap.dedent(sql))
    spec = root / "pipeline.yml"
    spec.write_text(
        f"name: p\nstorage: {root.as_uri()}/s\nlibraries:\n  - glob:\n      include: t/**\n"
    )
    return spec


_HEAD = """\
from pyspark import pipelines as dp
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.active()
"""


def test_spec_is_read_as_spark_pipelines_reads_it(tmp_path: Path) -> None:
    spec = tmp_path / "pipeline.yml"
    spec.write_text(
        "name: x\nstorage: file:///tmp/s\nschema: db\nconfiguration:\n  a: '1'\n"
        "libraries:\n  - glob:\n      include: t/**\n  - glob:\n      include: one.py\n"
    )
    s = load_spec(spec)
    assert (s.name, s.database, dict(s.configuration)) == ("x", "db", {"a": "1"})
    assert s.libraries == ("t/**/*", "one.py")
    spec.write_text("name: x\nstorage: s\nlibraries:\n  - glob:\n      include: t/**/*.py\n")
    with pytest.raises(SpecError, match=r"t/\*\*/\*\.py"):
        load_spec(spec)
    spec.write_text("name: x\n")
    with pytest.raises(SpecError, match="storage"):
        load_spec(spec)
    spec.write_text("name: x\nstorage: s\nflavour: 1\n")
    with pytest.raises(SpecError, match="flavour"):
        load_spec(spec)


def test_the_example_graph(tmp_path: Path) -> None:
    spec = write_pipeline(tmp_path)
    Inputs(tmp_path, 1).first()
    p = load_pipeline(spec)
    names = [d.name for d in p.datasets]
    assert names.index("silver_orders") > names.index("bronze_orders")
    assert all(names.index(g) > names.index("silver_orders") for g in names if "gold" in g)
    silver = p.dataset("silver_orders")
    assert silver.kind is DatasetKind.MATERIALIZED_VIEW
    assert silver.reads == {"bronze_orders", "bronze_customers"}
    assert silver.columns == ["order_id", "customer_id", "amount", "qty", "region"]
    assert str(silver.location) == "transformations/silver.sql:2"
    top = p.dataset("gold_top_customers")
    assert "ORDER BY `spent` DESC NULLS LAST, `customer_id` ASC NULLS FIRST LIMIT 3" in top.sql
    assert "row_number() OVER (PARTITION BY `region`" in p.dataset("gold_region_best").sql
    assert len(p.inputs) == 2
    assert "gold_regions" in p.describe()


def test_dataframe_operations_translate(tmp_path: Path) -> None:
    spec = _pipeline(
        tmp_path,
        py=_HEAD
        + """
        @dp.materialized_view
        def base():
            return spark.read.parquet("data")

        @dp.temporary_view
        def wide():
            b = spark.read.table("base")
            return (b.withColumn("v", F.upper("v")).withColumn("k2", F.col("k") * 2)
                    .withColumnRenamed("k2", "double_k").drop("double_k"))

        @dp.materialized_view
        def joined():
            a, b = spark.read.table("base"), spark.read.table("wide")
            return (a.join(b, "k", "full_outer").union(a.join(b, a["k"] == b["k"], "left_semi")
                    .select("k", "v", F.lit("x").alias("v")))
                    .distinct())

        @dp.materialized_view
        def by_name():
            b = spark.read.table("base")
            return b.unionByName(b.select("v", "k")).where("k > 1")

        @dp.materialized_view
        def via_sql():
            return spark.sql("SELECT k, count(*) AS n FROM base GROUP BY k")
        """.replace("\n        ", "\n"),
    )
    p = load_pipeline(spec)
    wide = p.dataset("wide")
    assert wide.kind is DatasetKind.TEMPORARY_VIEW
    assert wide.columns == ["k", "v"]
    assert "upper(`v`) AS `v`" in wide.sql
    joined = p.dataset("joined")
    assert joined.columns == ["k", "v", "v"]
    assert "coalesce(" in joined.sql and "LEFT SEMI JOIN" in joined.sql
    assert "SELECT DISTINCT" in joined.sql
    assert p.dataset("by_name").columns == ["k", "v"]
    assert p.dataset("via_sql").columns == ["k", "n"]


def _call_on_its_line(call: str) -> str:
    return f'b = spark.read.table("base")\nreturn (\n    {call}\n)\n'


_CHAIN = """\
b = spark.read.table("base")
wide = (
    b.where("k > 0")
    .withColumn("k2", F.col("k") * 2)
    .limit(5)
    .select("k", "k2")
)
return wide.union(b.select("k", F.col("k").alias("k2")))
"""


@pytest.mark.parametrize(
    ("body", "operator", "marker"),
    [
        (_call_on_its_line('b.withColumn("r", F.rand())'), "rand()", "F.rand()"),
        (
            _call_on_its_line('b.select(F.current_timestamp().alias("t"))'),
            "current_timestamp()",
            "current_timestamp",
        ),
        (_call_on_its_line("b.limit(5)"), "limit(5) without orderBy", "limit(5)"),
        (_call_on_its_line('b.dropDuplicates(["k"])'), "dropDuplicates(['k'])", "dropDup"),
        (_call_on_its_line("b.sample(0.5)"), "sample", "sample"),
        (_call_on_its_line('b.where("rand() > 0.5")'), "rand()", "where"),
        (
            _call_on_its_line('spark.sql("SELECT k, rand() AS r FROM base")'),
            "rand()",
            "spark.sql(",
        ),
        (_call_on_its_line('spark.read.table("nowhere")'), "nowhere", "nowhere"),
        (_CHAIN, "limit(5) without orderBy", ".limit(5)"),
    ],
    ids=[
        "rand",
        "current_timestamp",
        "limit",
        "dropDuplicates",
        "sample",
        "where_text",
        "sql",
        "unknown_table",
        "chain",
    ],
)
def test_what_cannot_be_maintained_fails_naming_dataset_operator_line(
    tmp_path: Path, body: str, operator: str, marker: str
) -> None:
    py = _HEAD + (
        '\n@dp.materialized_view\ndef base():\n    return spark.read.parquet("data")\n'
        "\n\n@dp.materialized_view\ndef bad():\n" + textwrap.indent(body, "    ")
    )
    lines = py.splitlines()
    call = next(n for n, text in enumerate(lines, 1) if marker in text)
    defined = next(n for n, text in enumerate(lines, 1) if "def bad" in text)
    assert call > defined + 1  # the call is on a line of its own, below the def
    spec = _pipeline(tmp_path, py=py)
    with pytest.raises(NotMaintainable) as e:
        load_pipeline(spec)
    assert e.value.dataset == "bad"
    assert operator in e.value.operator
    assert e.value.where.endswith(f"defs.py:{call}"), (e.value.where, call)
    assert f"defs.py:{call} cannot be maintained" in str(e.value)
    assert e.value.sqlstate == "0A000"


def test_call_sites_travel_with_the_graph_and_older_graphs_load() -> None:
    g = Graph()
    g.add_dataset(Dataset("d", DatasetKind.MATERIALIZED_VIEW, Location("f.py", 3)))
    site = Location("f.py", 5)
    g.add_flow(Flow("d", "d", Location("f.py", 3), relation=b"x", sites={7: site}))
    doc = json.loads(json.dumps(g.to_json()))
    assert Graph.from_json(doc).flows[0].sites == {7: site}
    del doc["flows"][0]["sites"]  # a graph cached before call sites were recorded
    old = Graph.from_json(doc).flows[0]
    assert (old.sites, old.relation, old.location) == ({}, b"x", Location("f.py", 3))


def test_definition_errors(tmp_path: Path) -> None:
    spec = _pipeline(
        tmp_path / "a",
        sql="CREATE MATERIALIZED VIEW x AS SELECT * FROM nowhere;",
    )
    with pytest.raises(NotMaintainable, match=r"nowhere|columns"):
        load_pipeline(spec)
    spec = _pipeline(
        tmp_path / "b",
        py=_HEAD + "\n@dp.materialized_view\ndef x():\n    return spark.read.table('y').count()\n",
    )
    with pytest.raises(DefinitionError, match=r"flow 'x' at .*defs.py:5"):
        load_pipeline(spec)
    spec = _pipeline(
        tmp_path / "c",
        sql="CREATE MATERIALIZED VIEW x AS SELECT * FROM y;\n"
        "CREATE MATERIALIZED VIEW y AS SELECT * FROM x;\n",
    )
    with pytest.raises(DefinitionError, match="cycle"):
        load_pipeline(spec)


def test_sql_statements_split_outside_strings() -> None:
    text = "SET a = 1;\n-- c;\nCREATE MATERIALIZED VIEW v AS\nSELECT ';' AS s;\n"
    assert split_statements(text) == [
        (1, "SET a = 1"),
        (3, "CREATE MATERIALIZED VIEW v AS\nSELECT ';' AS s"),
    ]


def test_expectations_stack_with_dataset_decorators_in_either_order(tmp_path: Path) -> None:
    py = _HEAD + (
        '\n@dp.expect("positive", "k > 0")\n@dp.materialized_view\n'
        '@dp.expect_or_drop("has_v", "v IS NOT NULL")\n'
        'def base():\n    return spark.read.parquet("data")\n'
        '\n@dp.table(name="top")\n@dp.expect_all_or_fail({"small": "k < 100", "v_a": "v <> \'z\'"})\n'
        'def top_fn():\n    return spark.read.table("base")\n'
        '\n@dp.expect_or_fail("k_set", "k IS NOT NULL")\n@dp.expect_all({"k1": "k >= 1"})\n'
        '@dp.temporary_view\ndef tv():\n    return spark.read.table("base")\n'
    )
    pipeline = load_pipeline(_pipeline(tmp_path, py=py))
    got = {
        d.name: sorted((e.name, e.action.value, e.location.line) for e in d.expectations)
        for d in pipeline.datasets
        if d.expectations
    }
    assert got == {
        "base": [("has_v", "drop", 7), ("positive", "warn", 5)],
        "top": [("small", "fail", 12), ("v_a", "fail", 12)],
        "tv": [("k1", "warn", 17), ("k_set", "fail", 16)],
    }
    assert "expectation positive [" in pipeline.describe()
    base = pipeline.dataset("base")
    assert "v IS NOT NULL" in base.sql and "k > 0" not in base.sql  # a warn keeps every row
    assert base.counts_sql is not None and "k > 0" in base.counts_sql


@pytest.mark.parametrize(
    ("decorators", "match"),
    [
        (
            '@dp.expect("bad", "k >")',
            r"dataset 'base': expectation 'bad' .* at .*defs\.py:5 does not parse",
        ),
        (
            '@dp.expect_or_drop("ghost", "nope > 1")',
            r"dataset 'base': expectation 'ghost' .*defs\.py:5 names column 'nope'.*columns: k, v",
        ),
        (
            '@dp.expect("a", "k > 0")\n@dp.expect_or_fail("a", "k < 9")',
            r"expectation 'a' .*defs\.py:5 has the name of the expectation at .*defs\.py:6",
        ),
        ('@dp.expect("r", "rand() > 0.5")', r"expectation 'r' .*defs\.py:5 is not deterministic"),
        ('@dp.expect("s", "k IN (SELECT 1)")', r"expectation 's' .*defs\.py:5 .*subquery"),
        (
            '@dp.expect("c", 42)',
            r"expect at .*defs\.py:5: the constraint of expectation 'c' must be",
        ),
        ("@dp.expect_all([])", r"expect_all at .*defs\.py:5 takes a non-empty dict"),
    ],
)
def test_expectation_errors_name_dataset_expectation_and_line(
    tmp_path: Path, decorators: str, match: str
) -> None:
    py = _HEAD + (
        f"\n{decorators}\n@dp.materialized_view\n"
        'def base():\n    return spark.read.parquet("data")\n'
    )
    with pytest.raises(DefinitionError, match=match):
        load_pipeline(_pipeline(tmp_path, py=py))


def test_loaded_definitions_are_kept_while_their_files_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spate.pipelines import loader

    py = _HEAD + '\n@dp.materialized_view\ndef base():\n    return spark.read.parquet("data")\n'
    spec = _pipeline(tmp_path / "p", py=py)
    cache = tmp_path / "cache"
    loads: list[int] = []
    real = loader._load
    monkeypatch.setattr(loader, "_load", lambda *a: loads.append(1) or real(*a))
    first = load_pipeline(spec, cache=cache)
    assert [d.name for d in load_pipeline(spec, cache=cache).datasets] == ["base"]
    assert len(loads) == 1  # the second came from the cache
    assert load_pipeline(spec, cache=cache).datasets[0].sql == first.datasets[0].sql
    load_pipeline(spec, cache=cache, reload=True)
    assert len(loads) == 2
    (tmp_path / "p" / "t" / "defs.py").write_text(py.replace("def base", "def base2"))
    assert [d.name for d in load_pipeline(spec, cache=cache).datasets] == ["base2"]
    assert len(loads) == 3  # a changed definition file is loaded again


def test_compiled_pipeline_is_kept_while_definitions_and_first_files_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spate.pipelines as pipelines

    py = _HEAD + '\n@dp.materialized_view\ndef base():\n    return spark.read.parquet("data")\n'
    spec = _pipeline(tmp_path / "p", py=py)
    cache = tmp_path / "cache"
    compiles: list[int] = []
    real = pipelines.compile_pipeline
    monkeypatch.setattr(
        pipelines, "compile_pipeline", lambda *a, **k: compiles.append(1) or real(*a, **k)
    )
    first = load_pipeline(spec, cache=cache)
    kept = load_pipeline(spec, cache=cache)
    assert len(compiles) == 1  # the second came from the cache, the same pipeline
    assert kept.datasets == first.datasets and kept.inputs == first.inputs
    # a file after the first: the schema compiling read is still the first file's
    pq.write_table(pa.table({"k": [3], "v": ["c"]}), tmp_path / "p" / "data" / "g.parquet")
    assert load_pipeline(spec, cache=cache).datasets == first.datasets
    assert len(compiles) == 1
    # the first file replaced with another schema: compiled again, with the new columns
    pq.write_table(pa.table({"k": [1], "w": [2.5]}), tmp_path / "p" / "data" / "f.parquet")
    (inp,) = load_pipeline(spec, cache=cache).inputs.values()
    assert len(compiles) == 2
    assert inp.names() == ["k", "w"]
    load_pipeline(spec, cache=cache, reload=True)
    assert len(compiles) == 3  # --reload compiles again too
    (tmp_path / "p" / "t" / "defs.py").write_text(py.replace("def base", "def base2"))
    assert [d.name for d in load_pipeline(spec, cache=cache).datasets] == ["base2"]
    assert len(compiles) == 4


def test_a_kept_pipeline_loads_without_pyspark_or_pandas(tmp_path: Path) -> None:
    """A later run's load imports neither pyspark's Connect classes (nor grpc) nor pandas:
    a second or more of CPU for every ``spate pipeline run``."""
    import subprocess
    import sys

    py = _HEAD + '\n@dp.materialized_view\ndef base():\n    return spark.read.parquet("data")\n'
    spec = _pipeline(tmp_path / "p", py=py)
    cache = tmp_path / "cache"
    load_pipeline(spec, cache=cache)
    code = (
        "import sys\nfrom pathlib import Path\nfrom spate.pipelines import load_pipeline\n"
        f"p = load_pipeline(Path({str(spec)!r}), cache=Path({str(cache)!r}))\n"
        "print([d.name for d in p.datasets])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'grpc', 'pandas', 'psycopg')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.splitlines()
    assert out == ["['base']", "[]"]
