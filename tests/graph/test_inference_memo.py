"""A static graph keeps its latest shape and dtype inferences (a bind asks
for the same ones three times). What an inference reads decides a hit: the
given shapes or dtypes and the variables' hints, which can be changed; a
bad value is never answered from the memo, and a caller changing the list
it got changes nothing for the next caller."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import AccHostError


def _net() -> mx.sym.Symbol:
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    return mx.sym.relu(fc, name="out")


def test_repeated_inferences_agree_and_are_independent_lists() -> None:
    graph = _net().graph
    first = graph.infer_shapes({"data": (2, 5)})
    first[0] = (99,)
    again = graph.infer_shapes({"data": [2, 5]})
    assert again[0] == (2, 5) and (2, 3) in again
    assert graph.infer_shapes({"data": (4, 5)}) != again
    dtypes = graph.infer_dtypes({"data": np.float32})
    dtypes[0] = None
    assert graph.infer_dtypes({"data": "float32"})[0] == np.dtype(np.float32)
    assert set(graph.infer_dtypes({"data": np.float16})) == {np.dtype(np.float16)}


def test_a_changed_hint_is_read_again() -> None:
    data = mx.sym.var("data", shape=(2, 5))
    graph = mx.sym.FullyConnected(data, num_hidden=3, name="fc").graph
    assert (2, 3) in graph.infer_shapes({})
    variable = next(node for node in graph.nodes if node.name == "data")
    variable.attrs["__shape__"] = "(7, 5)"
    assert (7, 3) in graph.infer_shapes({})


@pytest.mark.parametrize("bad", [(2.5, 5), (2, -5), "2,5"])
def test_a_bad_shape_still_raises_after_a_good_one(bad: object) -> None:
    graph = _net().graph
    graph.infer_shapes({"data": (2, 5)})
    with pytest.raises(AccHostError):
        graph.infer_shapes({"data": bad})  # type: ignore[dict-item]


def test_a_bad_dtype_still_raises_after_a_good_one() -> None:
    graph = _net().graph
    graph.infer_dtypes({"data": np.float32})
    with pytest.raises(AccHostError):
        graph.infer_dtypes({"data": "not a dtype"})
