"""``mx.nd.contrib``: MXNet 1.9's imperative control flow, ``foreach``,
``while_loop`` and ``cond``, and the registered ``_contrib_*`` operators.

As in MXNet, the imperative forms are Python loops: the user's functions
run on NDArrays, each operator of theirs dispatched as usual (on the
arrays' context). ``while_loop``'s step outputs have max_iterations rows,
as in the symbolic form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import ndarray as nd
from . import nesting
from .errors import GraphError, ShapeError
from .ndarray import NDArray
from .ops import registry

__all__ = ["foreach", "while_loop", "cond"]


def __getattr__(name: str) -> Callable[..., Any]:
    """mx.nd.contrib.<Op> for the registered "_contrib_<Op>" operators."""
    if registry.find(f"_contrib_{name}") is not None:
        return getattr(nd, f"_contrib_{name}")
    raise AttributeError(f"module 'acc_host.nd_contrib' has no attribute {name!r}")


def _flatten(value: Any, what: str) -> tuple[list[NDArray], Any]:
    return nesting.flatten(value, NDArray, what)


_regroup = nesting.regroup


def _truth(value: Any, what: str) -> bool:
    array = value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)
    if array.size != 1:
        raise ShapeError(f"{what} must hold one value, got shape {array.shape}")
    return bool(array.reshape(-1)[0])


def _stack(rows: list[NDArray]) -> NDArray:
    return nd.stack(*rows, axis=0, num_args=len(rows))


def foreach(body: Callable[[Any, Any], tuple[Any, Any]], data: Any,
            init_states: Any) -> tuple[Any, Any]:
    """body(data[i], states) -> (outputs, states) for i over axis 0 of data;
    returns (outputs stacked on axis 0, final states)."""
    flat_data, data_fmt = _flatten(data, "foreach input")
    flat_states, state_fmt = _flatten(init_states, "foreach states")
    lengths = {array.shape[0] if array.ndim else None for array in flat_data}
    if len(lengths) != 1 or None in lengths:
        raise ShapeError(f"foreach: the data arrays must share their first extent, got "
                         f"{[array.shape for array in flat_data]}")
    length = int(lengths.pop() or 0)
    states: Any = _regroup(list(flat_states), state_fmt)[0]
    rows: list[list[NDArray]] = []
    out_fmt: Any = None
    for i in range(length):
        slices = _regroup([array[i] for array in flat_data], data_fmt)[0]
        outputs, states = body(slices, states)
        flat_out, out_fmt = _flatten(outputs, "foreach output")
        _, new_fmt = _flatten(states, "foreach loop_vars")
        if new_fmt != state_fmt:
            raise GraphError("foreach: the input and output loop_vars have different format")
        rows.append(flat_out)
    if not rows:
        raise ShapeError("foreach: the data arrays are empty (axis 0 has length 0)")
    stacked = [_stack([row[k] for row in rows]) for k in range(len(rows[0]))]
    return _regroup(stacked, out_fmt)[0] if stacked else [], states


def while_loop(cond: Callable[..., Any], func: Callable[..., tuple[Any, Any]], loop_vars: Any,
               max_iterations: Any = None) -> tuple[Any, Any]:
    """func(*loop_vars) -> (step outputs, new loop_vars) while cond(*loop_vars)
    holds, at most max_iterations times. As MXNet's: the step outputs are
    stacked into max_iterations rows (MXNet leaves the rows past the last
    step unset; here they are zeros), and the final loop_vars come back as
    a list, or as one NDArray when loop_vars was one."""
    if max_iterations is None:
        raise GraphError("while_loop: max_iterations should be specified")
    try:
        limit = int(max_iterations.asscalar() if hasattr(max_iterations, "asscalar")
                    else max_iterations)
    except (TypeError, ValueError):
        raise GraphError(f"while_loop: cannot convert {max_iterations!r} to python int") from None
    single = isinstance(loop_vars, NDArray)
    current = [loop_vars] if single else list(loop_vars)
    if not current:
        raise GraphError("while_loop: loop_vars should contain at least one element")
    rows: list[list[NDArray]] = []
    out_fmt: Any = None
    while len(rows) < limit and _truth(cond(*current), "while_loop: the return of cond"):
        step, new_vars = func(*current)
        step = [] if step is None else list(step) if isinstance(step, tuple) else step
        new_vars = [] if new_vars is None else new_vars
        new_vars = [new_vars] if isinstance(new_vars, NDArray) else list(new_vars)
        if len(new_vars) != len(current):
            raise GraphError("while_loop: the length of loop_vars should be consistent during "
                             "the loop")
        flat_out, out_fmt = _flatten(step, "while output")
        if rows and len(flat_out) != len(rows[0]):
            raise GraphError("while_loop: the number of step outputs changed during the loop")
        rows.append(flat_out)
        current = new_vars
    outputs: Any = []
    if rows and rows[0]:
        stacked = []
        for k in range(len(rows[0])):
            values = np.stack([row[k].asnumpy() for row in rows])
            padded = np.zeros((limit, *values.shape[1:]), values.dtype)
            padded[:len(rows)] = values
            stacked.append(nd.array(padded, rows[0][k].context, padded.dtype))
        outputs = _regroup(stacked, out_fmt)[0]
    return outputs, current[0] if single else current


def cond(pred: Any, then_func: Callable[[], Any], else_func: Callable[[], Any]) -> Any:
    """then_func() when pred (one value) is non-zero, else else_func()."""
    return then_func() if _truth(pred, "cond: pred") else else_func()
