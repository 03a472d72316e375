"""Parsing operator attributes from MXNet's strings.

MXNet stores every attribute as a string in its own spelling: "(3, 3)",
"True", "1e-05", "None", "float32". Each parser here turns one such string
into a Python value and raises ValueError with a short reason otherwise; the
registry adds the operator and attribute names to the message.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["REQUIRED", "MAX_COUNT", "Param", "Attrs", "parse_int", "parse_count", "parse_float",
           "parse_bool", "parse_str", "parse_tuple", "parse_float_tuple", "choice", "optional",
           "parse_dtype", "format_value"]

Parser = Callable[[str], Any]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def _literal(text: str) -> Any:
    """ast.literal_eval, with the parser's own limits (nesting, memory,
    recursion) as ValueError."""
    try:
        return ast.literal_eval(text)
    except (MemoryError, RecursionError):
        raise ValueError(f"nested too deeply ({len(text)} characters)") from None


def parse_int(text: str) -> int:
    value = _literal(text.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {text!r}")
    return value


def parse_positive_int(text: str) -> int:
    """An integer of at least 1 (a block or window size)."""
    value = parse_int(text)
    if value < 1:
        raise ValueError(f"expected an integer of at least 1, got {text!r}")
    return value


#: The most inputs or outputs an attribute may give one node (num_args,
#: num_outputs). Each becomes a list of names before the graph is checked, so
#: an unbounded count would be an allocation the file asks for.
MAX_COUNT = 1 << 16


def parse_count(text: str) -> int:
    """A number of inputs or outputs: an integer from 1 to MAX_COUNT."""
    value = parse_int(text)
    if not 1 <= value <= MAX_COUNT:
        raise ValueError(f"expected a count from 1 to {MAX_COUNT}, got {text!r}")
    return value


def parse_float(text: str) -> float:
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("inf", "+inf", "infinity", "-inf", "-infinity", "nan"):
        return float(lowered)
    value = float(stripped)
    if not math.isfinite(value) and lowered not in ("inf", "-inf"):
        raise ValueError(f"expected a number, got {text!r}")
    return value


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(f"expected True or False, got {text!r}")


def parse_str(text: str) -> str:
    return text.strip()


def _literal_sequence(text: str) -> tuple[Any, ...]:
    stripped = text.strip()
    if stripped in ("", "()", "[]"):
        return ()
    value = _literal(stripped)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (value,)
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"expected a tuple, got {text!r}")
    return tuple(value)


# A bracketed list of decimal integers as Python writes them (no leading
# zeros, no underscores): what shapes, kernels and strides look like. Those
# are split directly; anything else goes through ast.literal_eval, which
# costs 30-60 us a call (ResNet-50's bind parses ~1,200 shape hints).
_INT = r"\s*-?(?:0|[1-9][0-9]*)\s*"
_PLAIN_TUPLE = re.compile(rf"\s*(?:\(((?:{_INT},)*{_INT},?)?\)|\[((?:{_INT},)*{_INT},?)?\])\s*")


def parse_tuple(text: str) -> tuple[int, ...]:
    """"(3, 3)", "[3,3]", "(3,)", "()", "3"; entries may be None (MXNet's
    optional entries, e.g. slice ends) or negative."""
    plain = _PLAIN_TUPLE.fullmatch(text)
    if plain is not None:
        inside = plain.group(1) or plain.group(2) or ""
        return tuple(int(item) for item in inside.split(",") if item.strip())
    values = _literal_sequence(text)
    for value in values:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"expected a tuple of integers, got {text!r}")
    return values


def parse_float_tuple(text: str) -> tuple[float, ...]:
    return tuple(float(value) for value in _literal_sequence(text))


def choice(*allowed: str) -> Parser:
    """A string that must be one of allowed."""
    def parse(text: str) -> str:
        value = text.strip()
        if value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return value
    return parse


def optional(parser: Parser) -> Parser:
    """parser, or None for "None"."""
    def parse(text: str) -> Any:
        return None if text.strip() == "None" else parser(text)
    return parse


_DTYPES = ("float16", "float32", "float64", "uint8", "int8", "int32", "int64", "bool")


def parse_dtype(text: str) -> str:
    return choice(*_DTYPES)(text)


@dataclass(frozen=True)
class Param:
    """One attribute of an operator: its parser and MXNet's default
    (REQUIRED when it has none)."""

    name: str
    parser: Parser
    default: Any = REQUIRED
    doc: str = ""


def format_value(value: Any) -> str:
    """MXNet's attribute spelling of a Python value: (3, 3) -> "(3, 3)",
    True -> "True", None -> "None", 1e-05 -> "1e-05"."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (tuple, list)):
        items = ", ".join("None" if item is None else format_value(item) for item in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalars
        return format_value(value.item())
    return str(value)


class Attrs(Mapping[str, Any]):
    """Parsed attributes of one operator instance; read as attrs.kernel or
    attrs["kernel"]. ``raw`` keeps the strings that were given."""

    __slots__ = ("_values", "raw")

    def __init__(self, values: dict[str, Any], raw: dict[str, str]) -> None:
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "raw", raw)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Attrs is read-only")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Attrs({self._values!r})"
