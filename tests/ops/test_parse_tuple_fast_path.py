"""parse_tuple splits plain integer tuples itself (the shapes of a bind)
and gives exactly what the ast.literal_eval path gives for every text."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acc_host.ops.params import parse_tuple


def _by_literal_eval(text: str) -> tuple[str, object]:
    """The answer of the general path: literal_eval, one number as a
    1-tuple, integers or None only."""
    try:
        stripped = text.strip()
        value = () if stripped in ("", "()", "[]") else ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ("error", None)
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or any(
            item is not None and (isinstance(item, bool) or not isinstance(item, int))
            for item in value):
        return ("error", None)
    return ("ok", tuple(value))


def _by_parse_tuple(text: str) -> tuple[str, object]:
    try:
        return ("ok", parse_tuple(text))
    except (ValueError, SyntaxError, TypeError):
        return ("error", None)


@pytest.mark.parametrize("text", [
    "(3, 3)", "[3,3]", "(3,)", "()", "[]", "( )", "[ ]", "3", "(3)", "( 1 , -2 ,)", "(-0,)",
    " (1, 224, 224) ", "\t[4, 5]\n", "(012)", "(1,2]", "[1,2)", "(,)", "(1,,2)", "(1 2)",
    "((1,2))", "(1.0, 2)", "(True,)", "(+1,)", "(0x10,)", "(1_000,)", "(None, 3)", "(-)",
    "(1,)(2,)", "(" + ", ".join(["7"] * 40) + ")"])
def test_the_same_answer_as_literal_eval(text: str) -> None:
    assert _by_parse_tuple(text) == _by_literal_eval(text)


@given(st.lists(st.sampled_from(["(", ")", "[", "]", ",", " ", "-", "0", "1", "9", "12",
                                 "007", "_", "+", "None", "."]), max_size=12).map("".join))
def test_random_texts_agree(text: str) -> None:
    assert _by_parse_tuple(text) == _by_literal_eval(text)


@given(st.lists(st.integers(-10**12, 10**12), max_size=8), st.booleans(), st.booleans())
def test_integer_tuples_parse(values: list[int], square: bool, trailing: bool) -> None:
    inside = ", ".join(map(str, values)) + ("," if trailing and values else "")
    text = f"[{inside}]" if square else f"({inside})"
    assert parse_tuple(text) == tuple(values)
