"""Session titles (reference §4.7), branch names (§4.5) and chat titles (§6.4)."""

from __future__ import annotations

import itertools
import re

import pytest
from openagents.domain.naming import (
    CITIES,
    branch_name,
    chat_title_from_text,
    city_candidates,
    generated_title,
)

SUFFIXED = re.compile(r"^(?P<city>.+) (?P<n>\d+)$")


def take(used: set[str], count: int) -> list[str]:
    return list(itertools.islice(city_candidates(used), count))


# ------------------------------------------------------------------- cities


def test_city_list_has_179_unique_names() -> None:
    assert len(CITIES) == 179
    assert len(set(CITIES)) == 179
    assert all(city == city.strip() and city for city in CITIES)


@pytest.mark.parametrize("city", ["Tokyo", "Paris", "London", "Kraków", "São Paulo", "Fiji"])
def test_city_list_contains_reference_names(city: str) -> None:
    assert city in CITIES


def test_first_candidates_are_every_city_once() -> None:
    first = take(set(), len(CITIES))
    assert sorted(first) == sorted(CITIES)


def test_never_yields_a_used_name() -> None:
    used = {"Tokyo", "Paris", "London"}
    names = take(used, 400)
    assert not used & set(names)
    assert set(names[: len(CITIES) - 3]) == set(CITIES) - used


def test_candidates_are_unique() -> None:
    names = take({"Tokyo"}, len(CITIES) * 3)
    assert len(names) == len(set(names))


def test_after_every_city_is_used_names_get_a_numeric_suffix() -> None:
    used = set(CITIES)
    names = take(used, len(CITIES))
    assert all(SUFFIXED.fullmatch(name) for name in names)
    assert {name.removesuffix(" 2") for name in names} == set(CITIES)
    assert all(name.endswith(" 2") for name in names)


def test_suffix_skips_used_suffixed_names_and_increments() -> None:
    used = set(CITIES) | {f"{city} 2" for city in CITIES} | {"Tokyo 3"}
    names = take(used, len(CITIES) - 1)
    assert "Tokyo 3" not in names
    assert all(name.endswith(" 3") for name in names)
    more = take(used, len(CITIES) + 5)[len(CITIES) - 1 :]
    assert all(name.endswith(" 4") for name in more)
    assert len(set(more)) == len(more)


def test_partially_used_then_exhausted_continues_with_suffixes() -> None:
    used = set(CITIES[:100])
    names = take(used, len(CITIES) - 100 + 10)
    assert set(names[: len(CITIES) - 100]) == set(CITIES[100:])
    assert all(SUFFIXED.fullmatch(name) for name in names[len(CITIES) - 100 :])


def test_does_not_mutate_the_used_set() -> None:
    used = {"Tokyo", "Paris"}
    snapshot = set(used)
    take(used, 250)
    assert used == snapshot


def test_matching_is_exact_and_case_sensitive() -> None:
    names = take({"tokyo"}, len(CITIES))
    assert "Tokyo" in names


def test_order_is_randomised() -> None:
    orders = {tuple(take(set(), 20)) for _ in range(5)}
    assert len(orders) > 1


# ------------------------------------------------------------------ branches

BRANCH = re.compile(r"^(?P<initials>[^/]+)/(?P<suffix>[0-9a-f]{8})$")


def initials(branch: str) -> str:
    match = BRANCH.fullmatch(branch)
    assert match, branch
    return match["initials"]


@pytest.mark.parametrize(
    ("username", "display_name", "expected"),
    [
        ("nico", "Nico Albanese", "na"),
        (None, "Nico Albanese", "na"),
        ("zz", "Nico", "n"),
        (None, "Ada Byron Lovelace", "ab"),
        ("ab", None, "ab"),
        ("ABcdef", None, "ab"),
        ("x", None, "x"),
        (None, None, "nb"),
        ("", "", "nb"),
        ("alice", "", "al"),
        ("alice", " ", "nb"),
        (None, "  ", "nb"),
    ],
)
def test_branch_name_initials(
    username: str | None, display_name: str | None, expected: str
) -> None:
    assert initials(branch_name(username, display_name)) == expected


def test_branch_name_suffix_is_random_hex() -> None:
    names = {branch_name("alice", None) for _ in range(20)}
    assert len(names) == 20
    assert all(BRANCH.fullmatch(name) for name in names)


def test_a_keyed_branch_name_is_the_same_for_the_same_key() -> None:
    first = branch_name("alice", "Alice Smith", key="session-1")
    assert first == branch_name("alice", "Alice Smith", key="session-1")  # a retry's branch
    assert first != branch_name("alice", "Alice Smith", key="session-2")
    assert BRANCH.fullmatch(first)
    assert initials(first) == "as"


# -------------------------------------------------------------- chat titles


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hi", "hi"),
        ("  padded  ", "padded"),
        ("x" * 80, "x" * 80),
        ("y" * 81, "y" * 80 + "..."),
        ("  " + "z" * 100 + "  ", "z" * 80 + "..."),
        ("", None),
        ("   \n\t", None),
    ],
)
def test_chat_title_from_text(text: str, expected: str | None) -> None:
    assert chat_title_from_text(text) == expected


# ------------------------------------------------------------ generated titles


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Fix login bug", "Fix login bug"),
        ("  Fix login bug  \nBecause the user asked", "Fix login bug"),  # the first line
        ("\n\n  Second line first\nthird", "Second line first"),  # the first non-blank one
        ('"Quoted title"', "Quoted title"),
        ("\u201cCurly quotes\u201d", "Curly quotes"),
        ("one two three four five six seven", "one two three four five"),  # 5 words
        ("w" * 100, "w" * 60),  # 60 characters
        ("word " * 3 + "x" * 70, "word word word " + "x" * 45),
        ("bad\x00control\x1bchars", "bad control chars"),
        ("\u202eevil\u202c title", "evil title"),  # bidi overrides
        ("tab\tand\rreturn", "tab and"),  # \r ends the line
        ("", None),
        ("   \n\t ", None),
        ('""', None),
        ("\u202e\u202c", None),
    ],
)
def test_generated_title(answer: str, expected: str | None) -> None:
    assert generated_title(answer) == expected
