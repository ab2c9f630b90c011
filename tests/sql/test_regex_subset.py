"""PostgreSQL patterns translated for the host engines mean what they mean in PostgreSQL;
constructs whose meaning differs are refused."""

from __future__ import annotations

import re

import pytest

from spate.sql.regex import InvalidRegex, UnsupportedRegex, similar_to_regex, translate_regex


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("a.b", "a\nb", True),  # . matches a newline
        ("b$", "ab\n", False),  # $ is the end of the text only
        ("b\\Z", "ab\n", False),
        ("^\\d+$", "\u0663", False),  # \d: ASCII digits
        ("^\\s$", "\u00a0", False),  # no-break space is not white space
        ("^\\s$", "\u2003", True),
        ("^\\S$", "\u00a0", True),
        ("^[\\s]$", "\u3000", True),
        ("^\\w+$", "été", True),
        ("^[\\d,]+$", "1,2", True),
        ("a\\.b", "a.b", True),
        ("a\\.b", "axb", False),
        ("(?=.*o)h", "hello", True),
        ("x{2,}", "axxb", True),
    ],
)
def test_translated_patterns_match_as_postgres(pattern: str, text: str, matches: bool) -> None:
    assert (re.search(translate_regex(pattern), text) is not None) is matches


def test_case_insensitive_folds_unicode() -> None:
    assert re.search(translate_regex("été", icase=True), "ÉTÉ")


@pytest.mark.parametrize(
    ("pattern", "replace"),
    [
        ("\\mcat", False),
        ("cat\\M", False),
        ("\\ycat", False),
        ("a\\b", False),
        ("(a)\\1", False),
        ("\\x41", False),
        ("[[:alpha:]]", False),
        ("[a&&b]", False),
        ("[]a]", False),
        ("[\\S]", False),
        ("(?i)abc", False),
        ("(?P<n>a)", False),
        ("***=a", False),
        ("a{,2}", False),
        ("a*+", False),
        ("a\\", False),
        ("a|ab", True),
        ("a.*?c", True),
        ("(ab)?c", True),
    ],
)
def test_differing_constructs_are_refused(pattern: str, replace: bool) -> None:
    with pytest.raises(UnsupportedRegex) as info:
        translate_regex(pattern, replace=replace)
    assert info.value.sqlstate == "0A000"


def test_alternation_and_lazy_quantifiers_are_fine_for_matching() -> None:
    assert re.search(translate_regex("a|ab"), "xab")
    assert re.search(translate_regex("a.*?c"), "abc")


def test_a_pattern_that_does_not_compile_is_2201B() -> None:
    with pytest.raises(InvalidRegex) as info:
        translate_regex("(*")
    assert info.value.sqlstate == "2201B"


@pytest.mark.parametrize(
    ("pattern", "escape", "text", "matches"),
    [
        ("a%", "\\", "abc", True),
        ("a.c", "\\", "abc", False),  # . is literal
        ("a_c", "\\", "a\nc", True),
        ("a#%", "#", "a%", True),
        ("a#%", "#", "ab", False),
        ("(ab)+", "\\", "abab", True),
        ("b", "\\", "abc", False),  # the whole text
        ("x^y$", "\\", "x^y$", True),
    ],
)
def test_similar_to_matches_the_whole_text(
    pattern: str, escape: str, text: str, matches: bool
) -> None:
    host = translate_regex(similar_to_regex(pattern, escape))
    assert (re.search(host, text) is not None) is matches
