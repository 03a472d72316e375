"""Sparse NDArray operators against MXNet 1.9.1's results.

tests/models/sparse/make_sparse_refs.py ran every case of ops.json in MXNet
1.9.1 and saved its inputs and outputs (ops.npz); each case is replayed here
on acc_host: the same storage type, shape and dtype, the same values, and for
sparse outputs the same stored positions (MXNet may allocate more than it
stores: the generator kept the first indptr[-1] CSR entries). acc_host keeps
the column indices of every CSR row sorted; MXNet's csr + csr leaves them in
its merge order, so the entries of each row are compared as sorted pairs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.sparse_cases import run_case

import acc_host as mx
from acc_host.errors import AccHostError
from acc_host.ndarray.sparse import check_csr, check_row_sparse

HERE = Path(__file__).resolve().parents[1] / "models" / "sparse"
MANIFEST = json.loads((HERE / "ops.json").read_text())
ARRAYS = dict(np.load(HERE / "ops.npz"))
CASES = {case["name"]: case for case in MANIFEST["cases"]}


def _input(name: str) -> mx.nd.NDArray:
    value = ARRAYS[f"in/{name}"]
    dense = mx.nd.array(value, dtype=value.dtype)
    stype = MANIFEST["inputs"][name]
    return dense if stype == "default" else dense.tostype(stype)


def _run(case: dict) -> Any:
    args = [_input(name) for name in case["inputs"]]
    kind, target, kwargs = case["kind"], case["target"], dict(case["kwargs"])
    for key in ("begin", "end"):
        if key in kwargs:
            kwargs[key] = tuple(kwargs[key])
    return run_case(mx, kind, target, args, kwargs)


def _sorted_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """indices and data with the entries of each row sorted by column."""
    rows = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    order = np.lexsort((indices, rows))
    return indices[order], data[order]


def _check(case: dict, result: Any) -> None:
    name = case["name"]
    assert result.stype == case["stype"], name
    assert list(result.shape) == case["shape"], name
    assert str(result.dtype) == case["dtype"], name
    np.testing.assert_allclose(result.asnumpy(), ARRAYS[f"out/{name}/dense"], rtol=1e-5,
                               atol=1e-6, err_msg=name)
    if case["stype"] == "csr":
        indptr = ARRAYS[f"out/{name}/indptr"]
        indices, data = _sorted_rows(indptr, ARRAYS[f"out/{name}/indices"],
                                     ARRAYS[f"out/{name}/data"])
        check_csr(result.shape, result.data.asnumpy(), result.indptr.asnumpy(),
                  result.indices.asnumpy())
        np.testing.assert_array_equal(result.indptr.asnumpy(), indptr, err_msg=name)
        np.testing.assert_array_equal(result.indices.asnumpy(), indices, err_msg=name)
        np.testing.assert_allclose(result.data.asnumpy(), data, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    elif case["stype"] == "row_sparse":
        check_row_sparse(result.shape, result.data.asnumpy(), result.indices.asnumpy())
        np.testing.assert_array_equal(result.indices.asnumpy(), ARRAYS[f"out/{name}/indices"],
                                      err_msg=name)
        np.testing.assert_allclose(result.data.asnumpy(), ARRAYS[f"out/{name}/data"],
                                   rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mxnet(name: str) -> None:
    case = CASES[name]
    if "error" in case:
        with pytest.raises(AccHostError):
            _run(case).asnumpy()
        return
    _check(case, _run(case))


def test_every_case_was_generated() -> None:
    assert len(CASES) >= 90
    assert {case["kind"] for case in CASES.values()} == {"nd", "sparse", "method", "op",
                                                         "getitem"}


CONSTRUCTORS = {case["name"]: case for case in MANIFEST["constructors"]}


def _argument(spec: dict) -> Any:
    """The first argument of a constructor call (make_sparse_refs.build_argument)."""
    if "tuple" in spec:
        data, indices, indptr = spec["tuple"]
        return (data, indices, indptr)
    if "tuple2" in spec:
        data, indices = spec["tuple2"]
        return (data, indices)
    if "numpy" in spec:
        return np.array(spec["numpy"], dtype=spec["dtype"])
    if "shape" in spec:
        return tuple(spec["shape"])
    return spec["stype"]


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_constructors_match_mxnet(name: str) -> None:
    case = CONSTRUCTORS[name]
    kwargs = {key: tuple(value) if key == "shape" else value
              for key, value in case["kwargs"].items()}
    result = getattr(mx.nd.sparse, case["target"])(_argument(case["spec"]), **kwargs)
    assert (result.stype, str(result.dtype), list(result.shape)) == \
        (case["stype"], case["dtype"], case["shape"])
    np.testing.assert_array_equal(result.asnumpy(), ARRAYS[f"ctor/{name}/dense"])
    for part in ("data", "indices", "indptr"):
        key = f"ctor/{name}/{part}"
        if key in ARRAYS:
            component = getattr(result, part).asnumpy()
            assert component.dtype == ARRAYS[key].dtype, part
            np.testing.assert_array_equal(component, ARRAYS[key])
