"""Storage types in symbol graphs: MXNet's codes and FInferStorageType.

MXNet marks a variable's storage type with the ``__storage_type__``
attribute, the storage type's code as a string (``mx.sym.Variable('x',
stype='csr')`` writes ``"2"``). Codes: -1 undefined, 0 default (dense),
1 row_sparse, 2 csr.
"""

from __future__ import annotations

from ..errors import GraphError

__all__ = ["STORAGE_CODES", "STORAGE_NAMES", "STORAGE_ATTR", "storage_type_code",
           "storage_type_name"]

#: The attribute MXNet writes on variables with a storage type.
STORAGE_ATTR = "__storage_type__"
STORAGE_CODES: dict[str, int] = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
STORAGE_NAMES: dict[int, str] = {code: name for name, code in STORAGE_CODES.items()}


def storage_type_code(stype: str) -> int:
    """The code of a storage type name ('default', 'row_sparse', 'csr')."""
    if stype not in STORAGE_CODES or stype == "undefined":
        raise GraphError(f"unknown storage type {stype!r} (expected 'default', 'row_sparse' "
                         "or 'csr')")
    return STORAGE_CODES[stype]


def storage_type_name(code: int | str) -> str:
    """The name of a storage type code (an int, or the string MXNet's JSON
    holds)."""
    try:
        number = int(code)
    except (TypeError, ValueError):
        raise GraphError(f"storage type code {code!r} is not an integer") from None
    if number not in STORAGE_NAMES:
        raise GraphError(f"unknown storage type code {number} (expected -1, 0, 1 or 2)")
    return STORAGE_NAMES[number]
