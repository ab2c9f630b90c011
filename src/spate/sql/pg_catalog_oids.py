"""The object ids of the ``pg_catalog`` and ``information_schema`` relations.

They are fixed (PostgreSQL's own where PostgreSQL fixes them: ``pg_class`` is 1259), so a name
cast to ``regclass`` that names one of them is a constant when a statement is planned
(:mod:`spate.sql.catalog_functions`), and the environment lists them with the same oids
(:mod:`spate.environment.pg_catalog`).
"""

from __future__ import annotations

from typing import Final

from spate.sql.pg_catalog_data import COLUMNS, LATER_COLUMNS

DEFINITIONS: Final = "pg_catalog.spate_definitions"
"""Not a PostgreSQL relation: the texts ``pg_get_indexdef``, ``pg_get_constraintdef`` and
``pg_get_viewdef`` answer with, by object oid (not listed in ``pg_class``)."""
NAMES: Final[tuple[str, ...]] = (*COLUMNS, DEFINITIONS, *LATER_COLUMNS)
"""Every catalog relation, qualified, in the order their ids are numbered."""
_FIXED: Final = {
    "pg_type": 1247, "pg_attribute": 1249, "pg_proc": 1255, "pg_class": 1259,
    "pg_database": 1262, "pg_am": 2601, "pg_attrdef": 2604, "pg_constraint": 2606,
    "pg_description": 2609, "pg_index": 2610, "pg_inherits": 2611, "pg_namespace": 2615,
    "pg_extension": 3079, "pg_collation": 3456, "pg_policy": 3256, "pg_trigger": 2620,
    "pg_rewrite": 2618, "pg_depend": 2608, "pg_tablespace": 1213, "pg_shdescription": 2396,
    "pg_opclass": 2616, "pg_enum": 3501, "pg_range": 3541, "pg_language": 2612,
    "pg_cast": 2605, "pg_operator": 2617, "pg_aggregate": 2600, "pg_sequence": 2224,
}  # fmt: skip
VISIBLE_BELOW: Final = 14500
"""Relations with an oid below this are in ``pg_catalog`` (on every search path)."""


def relation_oid(name: str) -> int | None:
    """The oid of the catalog relation ``name`` (``pg_catalog.pg_class``), if it is one."""
    if name not in NAMES:
        return None
    schema, _, relation = name.partition(".")
    n = NAMES.index(name) + 1
    if schema == "pg_catalog":
        return _FIXED.get(relation, 14000 + n)
    return VISIBLE_BELOW + n
