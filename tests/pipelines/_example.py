"""The test pipeline (tests/pipelines/example): its spec and input files, written per test.

bronze (two Parquet directories, Python) → silver (a filter and a join, SQL) → gold (a group-by,
a window, a top-k; Python). Inputs are drawn from a seed; each round adds a file of orders,
replaces one (same name, new rows) and, every other round, adds customers.
"""

from __future__ import annotations

import os
import random
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

EXAMPLE = Path(__file__).parent / "example"
GOLD = ("gold_regions", "gold_region_best", "gold_top_customers")
STORED = ("bronze_orders", "bronze_customers", "silver_orders", *GOLD)
REGIONS = ("north", "south", "east", "west")


def pipeline_seed(default: int) -> int:
    """The seed of a pipeline test's inputs: ``$SPATE_PIPELINE_SEED`` or ``default``,
    printed so that a failed run can be replayed."""
    seed = int(os.environ.get("SPATE_PIPELINE_SEED", str(default)))
    print(f"seed {seed} (replay: SPATE_PIPELINE_SEED={seed})")
    return seed


def small_pipeline(root: Path, name: str, files: dict[str, str]) -> Path:
    """A pipeline named ``name`` whose library is ``files`` (file name: text) under
    ``root/t``, its storage ``root/storage``: its spec."""
    (root / "t").mkdir(parents=True, exist_ok=True)
    for file, text in files.items():
        (root / "t" / file).write_text(text)
    spec = root / "pipeline.yml"
    spec.write_text(
        f"name: {name}\nstorage: {(root / 'storage').as_uri()}\n"
        "libraries:\n  - glob:\n      include: t/**\n"
    )
    return spec


def output_rows(root: Path, name: str) -> list[tuple[Any, ...]]:
    """The rows of the dataset ``name`` as written under a :func:`small_pipeline`'s storage,
    sorted."""
    rows = pq.read_table(root / "storage" / "tables" / name).to_pylist()
    return sorted((tuple(r.values()) for r in rows), key=repr)


def write_pipeline(root: Path, *, storage: str | None = None) -> Path:
    """Copy the pipeline's files under ``root`` with a spec naming ``root``'s inputs."""
    shutil.copytree(EXAMPLE / "transformations", root / "transformations")
    (root / "orders").mkdir()
    (root / "customers").mkdir()
    spec = root / "pipeline.yml"
    spec.write_text(
        "name: shop\n"
        f"storage: {storage or (root / 'storage').as_uri()}\n"
        "configuration:\n"
        f"  shop.orders: {root / 'orders'}\n"
        f"  shop.customers: {root / 'customers'}\n"
        "libraries:\n"
        "  - glob:\n"
        "      include: transformations/**\n"
    )
    return spec


class Inputs:
    """The seeded input files of the test pipeline."""

    def __init__(self, root: Path, seed: int, *, rows: int = 40) -> None:
        self.root, self.rng, self.rows = root, random.Random(seed), rows
        self.next_order, self.next_customer, self.files = 1, 1, 0

    def _write(self, directory: str, name: str, table: pa.Table) -> None:
        tmp = self.root / directory / f".{name}.tmp"
        pq.write_table(table, tmp)
        tmp.rename(self.root / directory / name)

    def customers(self, n: int) -> None:
        ids = list(range(self.next_customer, self.next_customer + n))
        self.next_customer += n
        table = pa.table(
            {
                "customer_id": pa.array(ids, pa.int64()),
                "name": [f"c{i}" for i in ids],
                "region": [self.rng.choice(REGIONS) for _ in ids],
            }
        )
        self._write("customers", f"customers-{ids[0]:05d}.parquet", table)

    def orders(self, name: str | None = None) -> str:
        n = self.rows
        ids = list(range(self.next_order, self.next_order + n))
        self.next_order += n
        customers = max(self.next_customer - 1, 1)
        table = pa.table(
            {
                "order_id": pa.array(ids, pa.int64()),
                "customer_id": pa.array(
                    [self.rng.randint(1, customers + 2) for _ in ids], pa.int64()
                ),
                "amount": pa.array([self.rng.randint(1, 500) for _ in ids], pa.int64()),
                "qty": pa.array([self.rng.choice([None, *range(1, 9)]) for _ in ids], pa.int32()),
                "status": [self.rng.choice(["paid", "paid", "open", "void"]) for _ in ids],
            }
        )
        if name is None:
            self.files += 1
            name = f"orders-{self.files:05d}.parquet"
        self._write("orders", name, table)
        return name

    def first(self) -> None:
        self.customers(8)
        self.orders()
        self.orders()

    def round(self, i: int) -> None:
        if i % 2 == 0:
            self.customers(3)
        replaced = f"orders-{self.rng.randint(1, self.files):05d}.parquet"
        self.orders()
        self.orders(replaced)  # an earlier file, replaced by new rows


def normalized(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows comparable across engines: by column name, integral decimals as ints, sorted."""

    def value(v: Any) -> Any:
        if isinstance(v, Decimal) and v == v.to_integral_value():
            return int(v)
        if isinstance(v, float):
            return round(v, 9)
        return v

    out = [tuple(sorted((k, value(v)) for k, v in r.items())) for r in rows]
    return sorted(out, key=repr)
