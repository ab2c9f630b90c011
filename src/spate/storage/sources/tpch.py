"""TPCH: the eight TPC-H tables at a small scale factor, then a stream of order changes.


Event 0 is the snapshot: ``region``, ``nation``, ``supplier``, ``customer``, ``part``,
``partsupp``, ``orders`` and ``lineitem`` at ``scale_factor`` (``orders`` has
``1,500,000 × sf`` rows, about four ``lineitem`` rows each). Every later event ``k`` changes one
order: slot ``j = (k - 1) mod |orders|`` moves from generation ``g = (k - 1) div |orders|`` to
``g + 1`` — its order row and line items are retracted and regenerated (same order key, new
values, one to seven new line items). Every value is a pure function of ``(seed, table, key,
generation)``, so the data is the same in any chunking.

The value distributions follow TPC-H's ``dbgen`` in spirit (ranges, formats, key relationships:
every ``lineitem`` names an existing part and one of that part's four suppliers, totals are
consistent with line items) without reproducing its exact random streams.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from spate.repr.desc import RelationDesc
from spate.repr.types import DATE, INT64, TEXT, numeric
from spate.storage.sources._hash import below
from spate.storage.sources._strings import choose, digits, join, varying_strings
from spate.storage.sources.loadgen import LoadGenerator
from spate.storage.sources.source import SourceError, diff_schema

I64 = npt.NDArray[np.int64]
MONEY: Final = numeric(15, 2)

REGION_DESC: Final = RelationDesc.of(
    ("r_regionkey", INT64, False), ("r_name", TEXT, False), ("r_comment", TEXT, False)
)
NATION_DESC: Final = RelationDesc.of(
    ("n_nationkey", INT64, False),
    ("n_name", TEXT, False),
    ("n_regionkey", INT64, False),
    ("n_comment", TEXT, False),
)
SUPPLIER_DESC: Final = RelationDesc.of(
    ("s_suppkey", INT64, False),
    ("s_name", TEXT, False),
    ("s_address", TEXT, False),
    ("s_nationkey", INT64, False),
    ("s_phone", TEXT, False),
    ("s_acctbal", MONEY, False),
    ("s_comment", TEXT, False),
)
CUSTOMER_DESC: Final = RelationDesc.of(
    ("c_custkey", INT64, False),
    ("c_name", TEXT, False),
    ("c_address", TEXT, False),
    ("c_nationkey", INT64, False),
    ("c_phone", TEXT, False),
    ("c_acctbal", MONEY, False),
    ("c_mktsegment", TEXT, False),
    ("c_comment", TEXT, False),
)
PART_DESC: Final = RelationDesc.of(
    ("p_partkey", INT64, False),
    ("p_name", TEXT, False),
    ("p_mfgr", TEXT, False),
    ("p_brand", TEXT, False),
    ("p_type", TEXT, False),
    ("p_size", INT64, False),
    ("p_container", TEXT, False),
    ("p_retailprice", MONEY, False),
    ("p_comment", TEXT, False),
)
PARTSUPP_DESC: Final = RelationDesc.of(
    ("ps_partkey", INT64, False),
    ("ps_suppkey", INT64, False),
    ("ps_availqty", INT64, False),
    ("ps_supplycost", MONEY, False),
    ("ps_comment", TEXT, False),
)
ORDERS_DESC: Final = RelationDesc.of(
    ("o_orderkey", INT64, False),
    ("o_custkey", INT64, False),
    ("o_orderstatus", TEXT, False),
    ("o_totalprice", MONEY, False),
    ("o_orderdate", DATE, False),
    ("o_orderpriority", TEXT, False),
    ("o_clerk", TEXT, False),
    ("o_shippriority", INT64, False),
    ("o_comment", TEXT, False),
)
LINEITEM_DESC: Final = RelationDesc.of(
    ("l_orderkey", INT64, False),
    ("l_partkey", INT64, False),
    ("l_suppkey", INT64, False),
    ("l_linenumber", INT64, False),
    ("l_quantity", MONEY, False),
    ("l_extendedprice", MONEY, False),
    ("l_discount", MONEY, False),
    ("l_tax", MONEY, False),
    ("l_returnflag", TEXT, False),
    ("l_linestatus", TEXT, False),
    ("l_shipdate", DATE, False),
    ("l_commitdate", DATE, False),
    ("l_receiptdate", DATE, False),
    ("l_shipinstruct", TEXT, False),
    ("l_shipmode", TEXT, False),
    ("l_comment", TEXT, False),
)

REGIONS: Final = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS: Final = (
    ("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4),
    ("ETHIOPIA", 0), ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2),
    ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2), ("JORDAN", 4), ("KENYA", 0),
    ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3),
    ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
)  # fmt: skip
SEGMENTS: Final = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
PRIORITIES: Final = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
INSTRUCTIONS: Final = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
MODES: Final = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
COLORS: Final = (
    "almond", "antique", "aquamarine", "azure", "beige", "bisque", "black", "blanched", "blue",
    "blush", "brown", "burlywood", "burnished", "chartreuse", "chiffon", "chocolate", "coral",
    "cornflower", "cornsilk", "cream", "cyan", "dark", "deep", "dim", "dodger", "drab",
    "firebrick", "floral", "forest", "frosted", "gainsboro", "ghost", "goldenrod", "green", "grey",
    "honeydew", "hot", "indian", "ivory", "khaki", "lace", "lavender", "lawn", "lemon", "light",
    "lime", "linen", "magenta", "maroon", "medium", "metallic", "midnight", "mint", "misty",
    "moccasin", "navajo", "navy", "olive", "orange", "orchid", "pale", "papaya", "peach", "peru",
    "pink", "plum", "powder", "puff", "purple", "red", "rose", "rosy", "royal", "saddle",
    "salmon", "sandy", "seashell", "sienna", "sky", "slate", "smoke", "snow", "spring", "steel",
    "tan", "thistle", "tomato", "turquoise", "violet", "wheat", "white", "yellow",
)  # fmt: skip
TYPE_1: Final = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_2: Final = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_3: Final = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
CONTAINER_1: Final = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_2: Final = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")

_EPOCH: Final = dt.date(1970, 1, 1)
START_DATE: Final = (dt.date(1992, 1, 1) - _EPOCH).days
END_ORDER_DATE: Final = (dt.date(1998, 8, 2) - _EPOCH).days - 151
CURRENT_DATE: Final = (dt.date(1995, 6, 17) - _EPOCH).days

# Draw streams, one per column and table.
(_SUPP, _CUST, _PART, _PS, _ORD, _LINE) = (100, 200, 300, 400, 500, 600)


def _decimal(cents: I64, precision: int = 15, scale: int = 2) -> pa.Array:
    """``decimal128(precision, scale)`` values from their unscaled integers."""
    unscaled = np.asarray(cents, dtype=np.int64)
    words = np.empty((len(unscaled), 2), dtype=np.int64)
    words[:, 0] = unscaled
    words[:, 1] = np.where(unscaled < 0, -1, 0)
    buf = pa.py_buffer(words.tobytes())
    return pa.Array.from_buffers(pa.decimal128(precision, scale), len(unscaled), [None, buf])


def _dates(days: I64) -> pa.Array:
    return pa.array(np.asarray(days, dtype=np.int32), pa.date32())


def _table(desc: RelationDesc, columns: list[pa.Array], diff: int = 1) -> pa.Table:
    n = len(columns[0])
    diffs = pa.array(np.full(n, diff, dtype=np.int64))
    return pa.Table.from_arrays([*columns, diffs], schema=diff_schema(desc))


def _keyed_name(prefix: str, keys: I64) -> pa.Array:
    return join(prefix, digits(keys, 9))


def _phone(seed: int, stream: int, keys: I64, nation: I64) -> pa.Array:
    return join(
        digits(nation + 10, 2),
        "-",
        digits(100 + below(seed, stream, keys, 900), 3),
        "-",
        digits(100 + below(seed, stream + 1, keys, 900), 3),
        "-",
        digits(1000 + below(seed, stream + 2, keys, 9000), 4),
    )


class TpchReader(LoadGenerator):
    def __init__(
        self,
        *,
        scale_factor: float = 0.01,
        seed: int = 0,
        tick_ms: int = 1000,
        per_tick: int = 1,
        max_events: int | None = None,
        max_chunk: int = 10_000,
    ) -> None:
        super().__init__(
            tick_ms=tick_ms, per_tick=per_tick, max_chunk=max_chunk, max_events=max_events
        )
        if not 0 < scale_factor <= 1:
            raise SourceError(f"TPCH: scale_factor must be in (0, 1], got {scale_factor!r}")
        self._seed = seed
        self.n_supplier = max(4, round(10_000 * scale_factor))
        self.n_customer = max(1, round(150_000 * scale_factor))
        self.n_part = max(1, round(200_000 * scale_factor))
        self.n_orders = max(1, round(1_500_000 * scale_factor))

    @property
    def outputs(self) -> Mapping[str, RelationDesc]:
        return {
            "region": REGION_DESC,
            "nation": NATION_DESC,
            "supplier": SUPPLIER_DESC,
            "customer": CUSTOMER_DESC,
            "part": PART_DESC,
            "partsupp": PARTSUPP_DESC,
            "orders": ORDERS_DESC,
            "lineitem": LINEITEM_DESC,
        }

    def initial_events(self) -> int:
        return 1

    def events(self, lower: int, upper: int) -> dict[str, pa.Table]:
        parts: dict[str, list[pa.Table]] = {}
        if lower == 0 and upper > 0:
            for name, table in self._snapshot().items():
                parts.setdefault(name, []).append(table)
        first = max(lower, 1)
        if upper > first:
            steps = np.arange(first - 1, upper - 1, dtype=np.int64)
            slots, gens = np.divmod(steps, self.n_orders)[1], steps // self.n_orders
            for diff, g in ((-1, gens), (1, gens + 1)):
                orders, lines = self._orders(slots, g, diff)
                parts.setdefault("orders", []).append(orders)
                parts.setdefault("lineitem", []).append(lines)
        return {k: pa.concat_tables(v) for k, v in parts.items()}

    # -- the snapshot -----------------------------------------------------------------------

    def _snapshot(self) -> dict[str, pa.Table]:
        s = self._seed
        out: dict[str, pa.Table] = {}
        rk = np.arange(len(REGIONS), dtype=np.int64)
        out["region"] = _table(
            REGION_DESC, [pa.array(rk), pa.array(REGIONS), varying_strings(s, 1, rk, 70)]
        )
        nk = np.arange(len(NATIONS), dtype=np.int64)
        out["nation"] = _table(
            NATION_DESC,
            [
                pa.array(nk),
                pa.array([n for n, _ in NATIONS]),
                pa.array([r for _, r in NATIONS], pa.int64()),
                varying_strings(s, 2, nk, 70),
            ],
        )
        sk = np.arange(1, self.n_supplier + 1, dtype=np.int64)
        s_nation = below(s, _SUPP, sk, len(NATIONS))
        out["supplier"] = _table(
            SUPPLIER_DESC,
            [
                pa.array(sk),
                _keyed_name("Supplier#", sk),
                varying_strings(s, _SUPP + 1, sk, 25),
                pa.array(s_nation),
                _phone(s, _SUPP + 2, sk, s_nation),
                _decimal(-99_999 + below(s, _SUPP + 5, sk, 1_099_998)),
                varying_strings(s, _SUPP + 6, sk, 60),
            ],
        )
        ck = np.arange(1, self.n_customer + 1, dtype=np.int64)
        c_nation = below(s, _CUST, ck, len(NATIONS))
        out["customer"] = _table(
            CUSTOMER_DESC,
            [
                pa.array(ck),
                _keyed_name("Customer#", ck),
                varying_strings(s, _CUST + 1, ck, 25),
                pa.array(c_nation),
                _phone(s, _CUST + 2, ck, c_nation),
                _decimal(-99_999 + below(s, _CUST + 5, ck, 1_099_998)),
                choose(s, _CUST + 6, ck, SEGMENTS),
                varying_strings(s, _CUST + 7, ck, 70),
            ],
        )
        pk = np.arange(1, self.n_part + 1, dtype=np.int64)
        name_words = [choose(s, _PART + i, pk, COLORS) for i in range(5)]
        mfgr = 1 + below(s, _PART + 6, pk, 5)
        out["part"] = _table(
            PART_DESC,
            [
                pa.array(pk),
                join(
                    name_words[0],
                    " ",
                    name_words[1],
                    " ",
                    name_words[2],
                    " ",
                    name_words[3],
                    " ",
                    name_words[4],
                ),
                join("Manufacturer#", digits(mfgr, 1)),
                join("Brand#", digits(mfgr * 10 + 1 + below(s, _PART + 7, pk, 5), 2)),
                join(
                    choose(s, _PART + 8, pk, TYPE_1),
                    " ",
                    choose(s, _PART + 9, pk, TYPE_2),
                    " ",
                    choose(s, _PART + 10, pk, TYPE_3),
                ),
                pa.array(1 + below(s, _PART + 11, pk, 50)),
                join(
                    choose(s, _PART + 12, pk, CONTAINER_1),
                    " ",
                    choose(s, _PART + 13, pk, CONTAINER_2),
                ),
                _decimal(self._retail_cents(pk)),
                varying_strings(s, _PART + 14, pk, 14),
            ],
        )
        ps_part = np.repeat(pk, 4)
        ps_i = np.tile(np.arange(4, dtype=np.int64), len(pk))
        ps_key = ps_part * 4 + ps_i
        out["partsupp"] = _table(
            PARTSUPP_DESC,
            [
                pa.array(ps_part),
                pa.array(self._supplier_of(ps_part, ps_i)),
                pa.array(1 + below(s, _PS, ps_key, 9999)),
                _decimal(100 + below(s, _PS + 1, ps_key, 99_901)),
                varying_strings(s, _PS + 2, ps_key, 120),
            ],
        )
        slots = np.arange(self.n_orders, dtype=np.int64)
        orders, lines = self._orders(slots, np.zeros(self.n_orders, dtype=np.int64), 1)
        out["orders"], out["lineitem"] = orders, lines
        return out

    def _retail_cents(self, partkey: I64) -> I64:
        return 90_000 + (partkey // 10) % 20_001 + 100 * (partkey % 1000)

    def _supplier_of(self, partkey: I64, i: I64) -> I64:
        n = self.n_supplier  # >= 4, so the four suppliers of a part are distinct
        return (partkey + i * (n // 4)) % n + 1

    # -- orders and their line items at a generation -----------------------------------------

    def _orders(self, slots: I64, gens: I64, diff: int) -> tuple[pa.Table, pa.Table]:
        s = self._seed
        okey = slots + 1
        idx = (gens << 32) + slots  # unique per (slot, generation)
        odate = START_DATE + below(s, _ORD, idx, END_ORDER_DATE - START_DATE + 1)
        nlines = 1 + below(s, _ORD + 1, idx, 7)
        # line items, flattened
        l_order = np.repeat(okey, nlines)
        l_idx = np.repeat(idx, nlines)
        l_odate = np.repeat(odate, nlines)
        starts = np.repeat(np.cumsum(nlines) - nlines, nlines)
        l_no = np.arange(len(l_order), dtype=np.int64) - starts + 1
        lidx = l_idx * 8 + l_no
        partkey = 1 + below(s, _LINE, lidx, self.n_part)
        suppkey = self._supplier_of(partkey, below(s, _LINE + 1, lidx, 4))
        qty = 1 + below(s, _LINE + 2, lidx, 50)
        ext = qty * self._retail_cents(partkey)
        disc = below(s, _LINE + 3, lidx, 11)
        tax = below(s, _LINE + 4, lidx, 9)
        ship = l_odate + 1 + below(s, _LINE + 5, lidx, 121)
        commit = l_odate + 30 + below(s, _LINE + 6, lidx, 61)
        receipt = ship + 1 + below(s, _LINE + 7, lidx, 30)
        shipped = ship <= CURRENT_DATE
        returned = receipt <= CURRENT_DATE
        rflag = np.where(returned, np.where(below(s, _LINE + 8, lidx, 2) == 0, "R", "A"), "N")
        lstatus = np.where(shipped, "F", "O")
        lines = _table(
            LINEITEM_DESC,
            [
                pa.array(l_order),
                pa.array(partkey),
                pa.array(suppkey),
                pa.array(l_no),
                _decimal(qty * 100),
                _decimal(ext),
                _decimal(disc),
                _decimal(tax),
                pa.array(rflag, pa.string()),
                pa.array(lstatus, pa.string()),
                _dates(ship),
                _dates(commit),
                _dates(receipt),
                choose(s, _LINE + 9, lidx, INSTRUCTIONS),
                choose(s, _LINE + 10, lidx, MODES),
                varying_strings(s, _LINE + 11, lidx, 27),
            ],
            diff,
        )
        # order totals and status from the line items
        line_total = (ext * (100 + tax) * (100 - disc) + 5000) // 10_000
        order_pos = np.repeat(np.arange(len(okey)), nlines)
        total = np.bincount(order_pos, weights=line_total, minlength=len(okey)).astype(np.int64)
        n_shipped = np.bincount(order_pos, weights=shipped, minlength=len(okey)).astype(np.int64)
        status = np.where(n_shipped == nlines, "F", np.where(n_shipped == 0, "O", "P"))
        orders = _table(
            ORDERS_DESC,
            [
                pa.array(okey),
                pa.array(1 + below(s, _ORD + 2, idx, self.n_customer)),
                pa.array(status, pa.string()),
                _decimal(total),
                _dates(odate),
                choose(s, _ORD + 3, idx, PRIORITIES),
                join("Clerk#", digits(1 + below(s, _ORD + 4, idx, 1000), 9)),
                pa.array(np.zeros(len(okey), dtype=np.int64)),
                varying_strings(s, _ORD + 5, idx, 48),
            ],
            diff,
        )
        return orders, lines
