"""Shape rules of the ONNX host operators that copy, gather or multiply
(MatMul, Gather, Squeeze, Unsqueeze) against numpy's own results on zeros:
the rules replace a run on zero arrays, which at an import's probe batch
extent filled (and multiplied) whole activations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import acc_host  # noqa: F401  (registers the operators)
from acc_host.errors import AccHostError
from acc_host.ops import registry

SHAPES = [(3,), (4, 3), (3, 5), (2, 4, 3), (1, 3, 5), (2, 1, 4, 3), (5, 3, 7), (3, 1), (0, 3)]


def _numpy_shapes(run, *args):  # type: ignore[no-untyped-def]
    try:
        return [tuple(np.shape(out)) for out in run(*args)]
    except (ValueError, IndexError, AccHostError):
        return None


def _rule_shapes(op, attrs, shapes):  # type: ignore[no-untyped-def]
    try:
        return [tuple(shape) for shape in op.infer_shape(attrs, list(shapes))[1]]
    except AccHostError:
        return None


@pytest.mark.parametrize("a,b", list(itertools.product(SHAPES, SHAPES)))
def test_matmul_shape_rule_is_numpys(a, b) -> None:  # type: ignore[no-untyped-def]
    op = registry.get("_onnx_matmul")
    expected = _numpy_shapes(lambda: [np.matmul(np.zeros(a), np.zeros(b))])
    assert _rule_shapes(op, op.parse({}), [a, b]) == expected


CASES = [
    ("_onnx_unsqueeze", {"axes": "(0,)"}, [(2, 3)]),
    ("_onnx_unsqueeze", {"axes": "(-1,)"}, [(2, 3)]),
    ("_onnx_unsqueeze", {"axes": "(0, 2)"}, [(4,)]),
    ("_onnx_unsqueeze", {"axes": "(3, 0)"}, [(2, 3)]),
    ("_onnx_unsqueeze", {"axes": "(1, 1)"}, [(2, 3)]),
    ("_onnx_unsqueeze", {"axes": "(5,)"}, [(2, 3)]),
    ("_onnx_unsqueeze", {"axes": "(0,)"}, [()]),
    ("_onnx_squeeze", {}, [(1, 3, 1)]),
    ("_onnx_squeeze", {"axes": "(0,)"}, [(1, 3, 1)]),
    ("_onnx_squeeze", {"axes": "(-1, 0)"}, [(1, 3, 1)]),
    ("_onnx_squeeze", {"axes": "(1,)"}, [(1, 3, 1)]),
    ("_onnx_squeeze", {"axes": "(4,)"}, [(1, 3, 1)]),
    ("_onnx_squeeze", {"axes": "()"}, [(1, 3)]),
    ("_onnx_gather", {"axis": "0"}, [(5, 3), ()]),
    ("_onnx_gather", {"axis": "1"}, [(5, 3), (2, 2)]),
    ("_onnx_gather", {"axis": "-1"}, [(4, 5, 3), (2,)]),
    ("_onnx_gather", {"axis": "0"}, [(0, 3), (2,)]),
    ("_onnx_gather", {"axis": "1"}, [(5, 0), (0,)]),
    ("_onnx_gather", {"axis": "2"}, [(5, 3), (1,)]),
]


@pytest.mark.parametrize("name,attrs,shapes", CASES)
def test_copying_operators_shape_rules_are_their_runs(name, attrs, shapes) -> None:  # type: ignore[no-untyped-def]
    op = registry.get(name)
    parsed = op.parse(attrs)
    kinds = [np.float32, np.int64]
    arrays = [np.zeros(shape, kinds[i]) for i, shape in enumerate(shapes)]
    assert _rule_shapes(op, parsed, shapes) == _numpy_shapes(op.compute, parsed, arrays)
