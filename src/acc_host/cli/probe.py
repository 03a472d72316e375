"""Asking a plugin which operators and dtypes it runs: one-operator graphs
of a standard set, annotated for each dtype and offered to supportedOps()
(the call the partitioner makes), one graph at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpCase", "STANDARD_CASES", "DEFAULT_DTYPES", "ProbeResult", "probe", "probe_case"]

DEFAULT_DTYPES = ("float32", "float16", "int8", "int32")
YES, NO = "yes", "no"

Shape = tuple[int, ...]
IMAGE: Shape = (1, 8, 8, 8)


@dataclass(frozen=True)
class OpCase:
    """One operator (with the attributes given in ``label``) on small inputs."""

    label: str
    build: Callable[[Any, Sequence[Any]], Any]  # (acc_host.symbol, data variables) -> Symbol
    inputs: Mapping[str, Shape] = field(default_factory=lambda: {"data": IMAGE})
    param_dtype: str | None = None  # the parameters' dtype whatever the data's (BatchNorm)


def _cases() -> list[OpCase]:
    two = {"data": IMAGE, "rhs": IMAGE}
    return [
        OpCase("Convolution", lambda s, v: s.Convolution(v[0], kernel=(3, 3), pad=(1, 1),
                                                        num_filter=8, name="op")),
        OpCase("Deconvolution", lambda s, v: s.Deconvolution(v[0], kernel=(2, 2), stride=(2, 2),
                                                            num_filter=8, name="op")),
        OpCase("FullyConnected", lambda s, v: s.FullyConnected(v[0], num_hidden=8, name="op"),
               {"data": (1, 16)}),
        OpCase("Activation(relu)", lambda s, v: s.Activation(v[0], act_type="relu", name="op")),
        OpCase("Activation(sigmoid)", lambda s, v: s.Activation(v[0], act_type="sigmoid",
                                                               name="op")),
        OpCase("Activation(tanh)", lambda s, v: s.Activation(v[0], act_type="tanh", name="op")),
        OpCase("LeakyReLU", lambda s, v: s.LeakyReLU(v[0], slope=0.1, name="op")),
        OpCase("Pooling(max)", lambda s, v: s.Pooling(v[0], kernel=(2, 2), stride=(2, 2),
                                                     pool_type="max", name="op")),
        OpCase("Pooling(avg)", lambda s, v: s.Pooling(v[0], kernel=(2, 2), stride=(2, 2),
                                                     pool_type="avg", name="op")),
        OpCase("BatchNorm", lambda s, v: s.BatchNorm(v[0], fix_gamma=False, name="op"),
               param_dtype="float32"),
        OpCase("LayerNorm", lambda s, v: s.LayerNorm(v[0], name="op"), {"data": (2, 16)}),
        OpCase("elemwise_add", lambda s, v: s.elemwise_add(v[0], v[1], name="op"), two),
        OpCase("elemwise_mul", lambda s, v: s.elemwise_mul(v[0], v[1], name="op"), two),
        OpCase("broadcast_add", lambda s, v: s.broadcast_add(v[0], v[1], name="op"),
               {"data": IMAGE, "rhs": (1, 8, 1, 1)}),
        OpCase("softmax", lambda s, v: s.softmax(v[0], name="op"), {"data": (2, 10)}),
        OpCase("Flatten", lambda s, v: s.Flatten(v[0], name="op")),
        OpCase("Concat", lambda s, v: s.Concat(v[0], v[1], dim=1, name="op"), two),
        OpCase("Reshape", lambda s, v: s.Reshape(v[0], shape=(0, -1), name="op")),
        OpCase("transpose", lambda s, v: s.transpose(v[0], axes=(0, 2, 3, 1), name="op")),
        OpCase("dot", lambda s, v: s.dot(v[0], v[1], name="op"),
               {"data": (4, 8), "rhs": (8, 6)}),
        OpCase("batch_dot", lambda s, v: s.batch_dot(v[0], v[1], name="op"),
               {"data": (2, 4, 8), "rhs": (2, 8, 6)}),
        OpCase("clip", lambda s, v: s.clip(v[0], a_min=0.0, a_max=6.0, name="op")),
        OpCase("sum", lambda s, v: s.sum(v[0], axis=1, name="op")),
        OpCase("exp", lambda s, v: s.exp(v[0], name="op")),
        OpCase("Dropout", lambda s, v: s.Dropout(v[0], p=0.5, name="op")),
    ]


STANDARD_CASES: tuple[OpCase, ...] = tuple(_cases())


@dataclass(frozen=True)
class ProbeResult:
    """One case's answers: dtype -> "yes", "no" or "n/a: <why>"."""

    label: str
    answers: dict[str, str]

    @property
    def accepted(self) -> list[str]:
        return [dtype for dtype, answer in self.answers.items() if answer == YES]


def probe_case(library: Any, case: OpCase, dtype: str, dev_id: int = 0) -> str:
    """Whether the plugin accepts case's operator in dtype: "yes", "no",
    or "n/a: ..." when the host cannot build the graph in that dtype."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    import numpy as np

    from .. import symbol as sym
    from ..abi.annotate import annotate_symbol
    from ..abi.tensor import TensorSpec
    from ..errors import AccHostError, PluginError

    variables = [sym.Variable(name) for name in case.inputs]
    try:
        net = case.build(sym, variables)
        names = [*net.list_arguments(), *net.list_auxiliary_states()]
        weights = [name for name in names if name not in case.inputs]
        dtypes = {name: np.dtype(dtype if name in case.inputs or case.param_dtype is None
                                 else case.param_dtype) for name in names}
        annotated = annotate_symbol(net, dict(case.inputs), weights, dtypes, dev_id)
    except (AccHostError, TypeError, ValueError) as error:
        return f"n/a: {error}"
    nodes = annotated["nodes"]
    operator = next(i for i, node in enumerate(nodes) if node["op"] != "null")
    data = {name: TensorSpec(shape, np.dtype(dtype)) for name, shape in case.inputs.items()}
    try:
        ids = library.supported_ops(json.dumps(annotated), data, len(nodes), dev_id)
    except PluginError as error:
        return f"n/a: {error}"
    return YES if operator in ids else NO


def probe(library: Any, dtypes: Sequence[str] = DEFAULT_DTYPES,
          cases: Sequence[OpCase] = STANDARD_CASES, dev_id: int = 0,
          step: Callable[[str], None] | None = None) -> list[ProbeResult]:
    """Every case in every dtype; step(label) is called after each case."""
    results = []
    for case in cases:
        results.append(ProbeResult(case.label, {dtype: probe_case(library, case, dtype, dev_id)
                                                for dtype in dtypes}))
        if step is not None:
            step(case.label)
    return results
