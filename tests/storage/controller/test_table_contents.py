"""A table's contents in the group committer: the snapshot form (Arrow, rows looked up by a
join) counts exactly as the rows form (a Counter), through applied changes, before and after
the rows are built; NULLs and other column types fall back to the rows form."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np

from spate.repr.arrow import updates_schema, updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, FLOAT64, INT64, TEXT, Row
from spate.storage.controller import table_contents, tables
from spate.storage.controller.table_contents import TableContents
from spate.storage.controller.tables import trusted_changes

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT, True))


def snapshot(desc: RelationDesc, rows: Counter[Row]) -> TableContents:
    table = updates_to_table(desc, [(r, 5, n) for r, n in rows.items()])
    return TableContents.of_snapshot(desc, table)


def test_the_snapshot_form_counts_like_the_rows_form_under_random_changes() -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    base: Counter[Row] = Counter(
        {(rng.randrange(50), rng.choice(["a", "b", None])): rng.randrange(1, 3) for _ in range(80)}
    )
    lazy, eager = snapshot(DESC, base), TableContents(base.items())
    assert not lazy.settled, seed
    for step in range(30):
        asked = [(rng.randrange(60), rng.choice(["a", "b"])) for _ in range(5)]
        assert lazy.prefetch(asked)
        assert [lazy.count(r) for r in asked] == [eager.count(r) for r in asked], seed
        present = [r for r, n in eager.items() if n > 0]
        changes = [(rng.choice(present), -1)] if present else []
        changes.append(((rng.randrange(60), rng.choice(["a", None])), 1))
        lazy.apply(changes)
        eager.apply(changes)
        if step == 15:
            lazy.build()  # as the worker thread does; the changes since are kept
            assert lazy.settle() and lazy.settled
    assert Counter(dict(lazy.items())) == Counter(dict(eager.items())), seed


def test_rows_with_nulls_or_float_tables_take_the_rows_form() -> None:
    lazy = snapshot(DESC, Counter({(1, None): 2, (2, "x"): 1}))
    assert not lazy.prefetch([(1, None)])  # a NULL: the committer builds the rows
    assert lazy.count((1, None)) == 2 and lazy.settled
    floats = RelationDesc.of(("x", FLOAT64, False))
    eager = snapshot(floats, Counter({(0.5,): 1}))
    assert eager.settled and eager.count((0.5,)) == 1
    # Rows written to a table never looked up stay Arrow (no row objects for most tables);
    # once a row was looked up, prepare folds new ones ahead of the next lookup.
    written = TableContents.empty(floats)
    written.append(updates_to_table(floats, [((0.25,), 5, 2)]))
    written.prepare()
    assert written.settled and not written.quick_lookup(1)
    assert written.count((0.25,)) == 2 and written.quick_lookup(1)
    written.append(updates_to_table(floats, [((0.25,), 5, -1)]))
    written.prepare()
    assert written.quick_lookup(1) and written.count((0.25,)) == 1


def test_an_integer_table_is_indexed_and_counts_like_the_rows_form() -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    ints = RelationDesc.of(("a", INT64, False), ("b", INT64, True), ("c", BOOL, True))

    def row() -> Row:
        return (rng.randrange(-5, 40), rng.choice([rng.randrange(-(2**63), 2**63), 0, 1]), True)

    base: Counter[Row] = Counter({row(): rng.randrange(1, 3) for _ in range(300)})
    base.update({(1, None, True): 2, (2, 3, None): 1})  # rows with NULLs are never looked up
    lazy, eager = snapshot(ints, base), TableContents(base.items())
    assert lazy.indexed and not lazy.settled
    for _step in range(30):
        present = [r for r, n in eager.items() if n > 0 and None not in r]
        asked = [rng.choice(present) for _ in range(5)] + [row() for _ in range(5)]
        asked += [(a, b, not c) for a, b, c in asked[:3]]  # differ in one column only
        assert lazy.counts(asked) == [eager.count(r) for r in asked], seed
        assert [lazy.count(r) for r in asked] == eager.counts(asked), seed
        changes = [(rng.choice(present), -1), (row(), 1)]
        lazy.apply(changes)
        eager.apply(changes)
    assert lazy.indexed  # no row of the snapshot became a Python object
    assert Counter(dict(lazy.items())) == Counter(dict(eager.items())), seed


def test_counts_of_many_rows_are_each_rows_count_in_every_form() -> None:
    """``counts`` answers as ``count`` of each row would: in the snapshot form (a text table
    joined, an integer table indexed, with the changes added since), in the rows form, and for
    rows with a NULL (which switch to the rows form)."""
    text = snapshot(DESC, Counter({(1, "a"): 2, (2, "b"): 1}))
    text.apply([((1, "a"), -1), ((3, "c"), 1)])
    asked = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (1, "a")]
    assert text.counts(asked) == [1, 1, 1, 0, 1] and not text.settled
    assert text.counts([(2, "b"), (9, None)]) == [1, 0] and text.settled
    assert text.counts(asked) == [1, 1, 1, 0, 1] and text.counts([]) == []
    ints = RelationDesc.of(("a", INT64, False), ("c", BOOL, False))
    indexed = snapshot(ints, Counter({(1, True): 1, (1, False): 3, (2**63 - 1, True): 1}))
    indexed.apply([((1, False), -1)])
    asked_ints = [(1, True), (1, False), (2**63 - 1, True), (-(2**63), False)]
    assert indexed.counts(asked_ints) == [1, 2, 1, 0] and indexed.indexed
    rows = TableContents(Counter({(1, True): 2}).items())
    assert rows.counts([(1, True), (1, False)]) == [2, 0]


def test_rows_sharing_a_hash_and_an_empty_snapshot_count_exactly(monkeypatch: Any) -> None:
    """The index compares every candidate of a hash shared by several rows (forced here with a
    weak hash), and an empty integer table counts nothing."""
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    monkeypatch.setattr(table_contents, "_hash", lambda cols, n: (cols[0] % 3).astype(np.uint64))
    ints = RelationDesc.of(("a", INT64, False), ("b", INT64, False))
    base: Counter[Row] = Counter(
        {(rng.randrange(12), rng.randrange(4)): rng.randrange(1, 3) for _ in range(30)}
    )
    lazy, eager = snapshot(ints, base), TableContents(base.items())
    asked = [(a, b) for a in range(-1, 13) for b in range(5)]
    assert lazy.indexed and not lazy.quick_lookup(len(asked))
    assert lazy.prefetch(asked)
    assert lazy.quick_lookup(len(asked))  # the index is built now
    assert [lazy.count(r) for r in asked] == [eager.count(r) for r in asked], seed
    empty = snapshot(ints, Counter())
    assert empty.prefetch(asked) and [empty.count(r) for r in asked] == [0] * len(asked)


def test_arrow_chunks_count_like_rows_in_any_order_and_any_form(monkeypatch: Any) -> None:
    """Inserts added as Arrow chunks (indexed and merged on ``prepare``), changes as rows (made
    a chunk once many: a few here) and a base snapshot added last (a read finishing after
    later writes) count as the rows form."""
    monkeypatch.setattr(table_contents, "_FOLD_CHANGES", 3)
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    for desc in (RelationDesc.of(("a", INT64, False), ("b", BOOL, True)), DESC):
        text = desc is DESC

        def row(text: bool = text) -> Row:
            return (rng.randrange(40), rng.choice(["a", "b"]) if text else rng.random() < 0.5)

        base: Counter[Row] = Counter({row(): rng.randrange(1, 3) for _ in range(60)})
        contents, eager = TableContents.empty(desc), TableContents(base.items())
        for step in range(25):
            chunk = [(row(), 5, 1) for _ in range(rng.randrange(0, 30))]
            contents.append(updates_to_table(desc, chunk))
            eager.apply([(r, 1) for r, _t, _d in chunk])
            present = [r for r, n in eager.items() if n > 0]
            gone = [(rng.choice(present), -1)]
            contents.apply(gone)
            eager.apply(gone)
            if step == 10:
                table = updates_to_table(desc, [(r, 5, n) for r, n in base.items()])
                contents.add_base(table, contents.index_of(table))
            if rng.random() < 0.5:
                contents.prepare()
            if step > 10:
                asked = [*rng.sample(present, 5), row(), row()]
                assert contents.prefetch(asked)
                assert [contents.count(r) for r in asked] == [eager.count(r) for r in asked], seed
        assert contents.indexed == (not text)
        assert Counter(dict(contents.items())) == Counter(dict(eager.items())), seed


def test_prepare_is_quick_for_small_appends_and_not_when_it_would_merge_many_rows() -> None:
    ints = RelationDesc.of(("a", INT64, False), ("b", INT64, False))

    def chunk(start: int, n: int) -> Any:
        return updates_to_table(ints, [((i, i), 1, 1) for i in range(start, start + n)])

    contents = TableContents.empty(ints)
    assert contents.indexed and contents.prepare_is_quick()
    contents.append(chunk(0, 3_000))
    assert contents.prepare_is_quick()  # 3,000 rows to index
    contents.prepare()
    contents.append(chunk(3_000, 2_000))
    assert not contents.prepare_is_quick()  # indexed, then merged with the 3,000 before
    contents.prepare()
    for i in range(20):  # one-row writes: each indexed (and merged with small runs) at once
        contents.append(chunk(10_000 + i, 1))
        assert contents.prepare_is_quick()
        contents.prepare()
    assert contents.prefetch([(0, 0), (10_019, 10_019), (-1, -1)])
    assert [contents.count(r) for r in [(0, 0), (10_019, 10_019), (-1, -1)]] == [1, 1, 0]

    rows_form = TableContents.empty(RelationDesc.of(("x", FLOAT64, False)))
    assert rows_form.settled and rows_form.prepare_is_quick()
    big = updates_to_table(rows_form.desc, [((float(i),), 1, 1) for i in range(5_000)])
    rows_form.append(big)
    assert rows_form.prepare_is_quick()  # no row looked up yet: prepare leaves the chunk
    rows_form.prefetch([(1.0,)])
    rows_form.append(big)
    assert not rows_form.prepare_is_quick()  # 5,000 rows to fold into the rows


def test_trusted_changes_of_an_int64_table_are_the_general_conversion() -> None:
    """An int64 table's changes become Arrow through numpy: the same table as the general
    conversion (schema, values at the int64 bounds, diffs, time 0); a NULL or another column
    type takes the general one."""
    ints = RelationDesc.of(("a", INT64, False), ("b", INT64, True))
    changes: list[tuple[Row, int]] = [((1, 2), 1), ((2**63 - 1, -(2**63)), -2), ((1, 2), 3)]
    fast = tables._int64_changes(ints, changes)
    assert fast is not None
    general = updates_to_table(ints, [(r, 0, d) for r, d in changes])
    assert fast.equals(general.cast(updates_schema(ints)), check_metadata=True)
    assert trusted_changes(ints, changes).table.equals(fast)
    with_null: list[tuple[Row, int]] = [((1, None), 1)]
    assert tables._int64_changes(ints, with_null) is None
    assert trusted_changes(ints, with_null).table.column("b").to_pylist() == [None]
    assert tables._int64_changes(DESC, [((1, "a"), 1)]) is None
    assert tables._int64_changes(ints, []) is None


def _chunk(desc: RelationDesc, changes: list[tuple[Row, int]]) -> Any:
    return updates_to_table(desc, [(r, 5, d) for r, d in changes]).cast(updates_schema(desc))


def test_merged_index_runs_drop_the_rows_their_retractions_cancel() -> None:
    """A retraction merged with the insert it cancels leaves nothing in the index: a table
    taking updates keeps an index about its live size."""
    ints = RelationDesc.of(("a", INT64, False), ("b", INT64, False))
    contents = TableContents.empty(ints)
    rows = [(i, i * 7) for i in range(1000)]
    contents.append(_chunk(ints, [(r, 1) for r in rows]))
    contents.prepare()
    contents.append(_chunk(ints, [(r, -1) for r in rows[:600]] + [((5000, 1), 1)]))
    contents.prepare()  # the second run is as large as the first: they merge
    assert [run.size for run in contents._runs] == [401]
    assert contents.counts([rows[0], rows[700], (5000, 1), (1, 1)]) == [0, 1, 1, 0]


def test_merged_runs_count_exactly_under_shared_hashes_and_cancelling_updates(
    monkeypatch: Any,
) -> None:
    """Chunks of inserts and retractions, indexed and merged (and consolidated) as they come,
    count as the rows form after every chunk, with a weak hash that makes rows of different
    values share hashes (so equal rows need not be neighbours in a merged run)."""
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    monkeypatch.setattr(table_contents, "_hash", lambda cols, n: (cols[0] % 5).astype(np.uint64))
    ints = RelationDesc.of(("a", INT64, False), ("b", INT64, False))
    lazy, eager = TableContents.empty(ints), TableContents()
    asked = [(a, b) for a in range(12) for b in range(4)]
    for _step in range(40):
        present = [r for r, n in eager.items() if n > 0]
        changes = [(r, -1) for r in rng.sample(present, min(len(present), rng.randrange(4)))]
        changes += [((rng.randrange(12), rng.randrange(4)), 1) for _ in range(rng.randrange(1, 6))]
        lazy.append(_chunk(ints, changes))
        eager.apply(changes)
        lazy.prepare()
        assert lazy.counts(asked) == eager.counts(asked), seed
    assert sum(run.size for run in lazy._runs) < 40 * 6, seed
