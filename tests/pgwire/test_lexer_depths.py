"""Paren depths of statement text: the same as a character-by-character scan on seeded random
texts, and kept as runs, so a 10 MiB literal costs no ten-million-step Python loop (work that
held the GIL for seconds beside the event loop)."""

from __future__ import annotations

import random

from spate.pgwire import lexer


def _reference(sql: str) -> list[int]:
    out = [0] * (len(sql) + 1)
    depth, i, n = 0, 0, len(sql)
    while i < n:
        j = lexer._skip(sql, i)
        if j != i:
            for k in range(i, j):
                out[k] = -1
            i = j
            continue
        if sql[i] == "(":
            depth += 1
        out[i] = depth
        if sql[i] == ")":
            depth -= 1
        i += 1
    out[n] = depth
    return out


def test_depths_match_a_character_scan(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = list("()'\"$-/*eE \\;ab1\n")
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        d = lexer.depths(text)
        assert list(d) == _reference(text), text
        assert d[-1] == d[len(text)]


def test_a_long_literal_is_one_run() -> None:
    big = "INSERT INTO t VALUES ('" + "x(" * (5 * 1024 * 1024) + "'), ((1))"
    d = lexer.depths(big)
    assert len(d) == len(big) + 1
    assert len(d._starts) < 16
    assert d[30] == -1 and d[len(big) - 2] == 2 and d[len(big)] == 0
