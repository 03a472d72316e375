"""The control-flow operators' registry entries: ``_cond``, ``_foreach``,
``_while_loop`` (MXNet 1.9's, with its attributes) and ``_loop`` (ONNX
Loop's semantics, which no MXNet operator has: a trip count and a condition
together, scan outputs as long as the loop ran).

A node of one of them owns graphs of its own, its bodies (MXNet's
"subgraphs"); what it computes depends on them, so the entries here only
parse attributes and name inputs and outputs. acc_host.graph.control_flow
gives each such node, when its graph is built, an operator that runs its
bodies; the entries' own kernels refuse to run without them.
"""

from __future__ import annotations

from typing import Any

from ..errors import OperatorError
from .params import Attrs, Param, parse_count, parse_int, parse_tuple
from .registry import OpDef, register

__all__ = ["BODIES", "body_count"]

#: Bodies per operator, in the order of the node's "subgraphs".
BODIES: dict[str, tuple[str, ...]] = {
    "_cond": ("cond", "then", "else"),
    "_foreach": ("body",),
    "_while_loop": ("cond", "func"),
    "_loop": ("body",),
}


def body_count(op_name: str) -> int:
    return len(BODIES[op_name])


def _locs(text: str) -> tuple[int, ...]:
    values = parse_tuple(text)
    if any(value is None or value < 0 for value in values):
        raise ValueError(f"expected a list of non-negative integers, got {text!r}")
    return tuple(int(value) for value in values)


def _inputs(op_name: str) -> Any:
    def names(attrs: Attrs) -> list[str]:
        # MXNet's num_args counts the bodies too (they are the symbol's first
        # positional arguments when the node is made).
        count = attrs.num_args - body_count(op_name)
        if count < 0:
            raise OperatorError(f"{op_name}: num_args={attrs.num_args} is fewer than its "
                                f"{body_count(op_name)} bodies")
        return [f"data{k}" for k in range(count)]
    return names


def _outputs(attrs: Attrs) -> list[str]:
    if attrs.num_outputs == 1:
        return ["output"]
    return [f"output{k}" for k in range(attrs.num_outputs)]


def _needs_bodies(op_name: str) -> Any:
    def refuse(attrs: Attrs, values: Any) -> Any:
        raise OperatorError(f"{op_name}: a control-flow operator runs its bodies (the node's "
                            "subgraphs); it cannot run on its own")
    return refuse


_COMMON = (Param("num_args", parse_count, doc="inputs plus bodies"),
           Param("num_outputs", parse_count))

_PARAMS: dict[str, tuple[Param, ...]] = {
    "_cond": (*_COMMON, Param("cond_input_locs", _locs), Param("then_input_locs", _locs),
              Param("else_input_locs", _locs)),
    "_foreach": (*_COMMON, Param("num_out_data", parse_int), Param("in_data_locs", _locs),
                 Param("in_state_locs", _locs), Param("remain_locs", _locs)),
    "_while_loop": (*_COMMON, Param("num_out_data", parse_int), Param("max_iterations", parse_int),
                    Param("cond_input_locs", _locs), Param("func_input_locs", _locs),
                    Param("func_var_locs", _locs)),
    "_loop": (*_COMMON, Param("num_carried", parse_int), Param("body_input_locs", _locs)),
}

_DOCS = {
    "_cond": "MXNet's cond: runs the then or the else body as the cond body says.",
    "_foreach": "MXNet's foreach: the body over axis 0 of the data, carrying states.",
    "_while_loop": "MXNet's while_loop: the func body while the cond body holds.",
    "_loop": "ONNX Loop: the body up to a trip count while its condition holds.",
}

for _name, _params in _PARAMS.items():
    register(OpDef(name=_name, params=_params, compute=_needs_bodies(_name),
                   infer_shape=_needs_bodies(_name), infer_type=_needs_bodies(_name),
                   arguments=_inputs(_name), outputs=_outputs, doc=_DOCS[_name]))
