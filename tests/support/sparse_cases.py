"""One recorded sparse-operator case applied to a library: MXNet 1.9.1 when
tests/models/sparse/make_sparse_refs.py records the references, acc_host when
tests/nd/test_sparse_ops.py checks them, so both run each case the same way.
Plain Python: it imports neither library."""

from __future__ import annotations

import operator
from typing import Any


def run_case(mx: Any, kind: str, target: str, args: list, kwargs: dict) -> Any:
    """Case kind "nd" (mx.nd.<target>), "sparse" (mx.nd.sparse.<target>),
    "method" (args[0].<target>(**kwargs)), "getitem" (args[0][key]) or an
    operator of Python's operator module (with "neg" and "rsub")."""
    if kind == "nd":
        return getattr(mx.nd, target)(*args, **kwargs)
    if kind == "sparse":
        return getattr(mx.nd.sparse, target)(*args, **kwargs)
    if kind == "method":
        return getattr(args[0], target)(**kwargs)
    if kind == "getitem":
        key = kwargs["key"]
        return args[0][slice(*key) if isinstance(key, list) else key]
    if target == "neg":
        return -args[0]
    if target == "rsub":
        return kwargs["other"] - args[0]
    other = args[1] if len(args) > 1 else kwargs["other"]
    return getattr(operator, target)(args[0], other)
