"""gluon.rnn.RNNCell, LSTMCell and GRUCell: one time step each, with MXNet
1.9's parameters (i2h_weight (G*H, I), h2h_weight (G*H, H), i2h_bias,
h2h_bias) and operators (FullyConnected, SliceChannel, Activation), so a
cell hybridizes and exports as MXNet's does. ``cell(x, states)`` returns
(output, new states); ``unroll(length, inputs, begin_state, layout,
merge_outputs)`` runs it over a sequence.
"""

from __future__ import annotations

from typing import Any

from ... import ndarray as nd
from ... import symbol as sym
from ...errors import InvalidArgumentError, ShapeError
from ..block import HybridBlock

__all__ = ["RecurrentCell", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell"]


class HybridRecurrentCell(HybridBlock):
    """A cell: hybrid_forward(F, x, *states, **params) returns the new
    states, the first of which is also the output."""

    _gates = 1

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hidden_size, self._input_size = hidden_size, input_size
        rows = self._gates * hidden_size
        with self.name_scope():
            self.i2h_weight = self.params.get("i2h_weight", shape=(rows, input_size),
                                              init=i2h_weight_initializer,
                                              allow_deferred_init=True)
            self.h2h_weight = self.params.get("h2h_weight", shape=(rows, hidden_size),
                                              init=h2h_weight_initializer,
                                              allow_deferred_init=True)
            self.i2h_bias = self.params.get("i2h_bias", shape=(rows,),
                                            init=i2h_bias_initializer, allow_deferred_init=True)
            self.h2h_bias = self.params.get("h2h_bias", shape=(rows,),
                                            init=h2h_bias_initializer, allow_deferred_init=True)

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def begin_state(self, batch_size: int = 0, func: Any = None, **kwargs: Any) -> list[Any]:
        make = func or nd.zeros
        return [make(shape=info["shape"], **kwargs) for info in self.state_info(batch_size)]

    def reset(self) -> None:
        """MXNet resets its step counters here; a cell here keeps none."""

    def __call__(self, inputs: Any, states: Any) -> Any:
        if isinstance(states, (nd.NDArray, sym.Symbol)):
            states = [states]
        states = list(states)
        if len(states) != len(self.state_info()):
            raise InvalidArgumentError(f"{type(self).__name__}: {len(self.state_info())} "
                                       f"states expected, got {len(states)}")
        if isinstance(inputs, nd.NDArray):
            if len(inputs.shape) != 2:
                raise ShapeError(f"{type(self).__name__}: inputs must be (batch, features), "
                                 f"got {inputs.shape}")
            weight = self.i2h_weight
            if weight.shape is not None and weight.shape[1] == 0:
                weight.shape = (weight.shape[0], inputs.shape[1])
            weight._finish_deferred_init()
        result = super().__call__(inputs, *states)
        new_states = list(result) if isinstance(result, (list, tuple)) else [result]
        return new_states[0], new_states

    def _projections(self, F: Any, x: Any, h: Any, i2h_weight: Any, h2h_weight: Any,  # noqa: N803
                     i2h_bias: Any, h2h_bias: Any) -> tuple[Any, Any]:
        rows = self._gates * self._hidden_size
        i2h = F.FullyConnected(x, i2h_weight, i2h_bias, num_hidden=rows,
                               name=f"{self._prefix}i2h")
        h2h = F.FullyConnected(h, h2h_weight, h2h_bias, num_hidden=rows,
                               name=f"{self._prefix}h2h")
        return i2h, h2h

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> Any:
        """The cell over length steps of inputs ((N, T, C) for "NTC", (T, N, C)
        for "TNC", or a list of (N, C)); (outputs, final states)."""
        if valid_length is not None:
            raise InvalidArgumentError(f"{type(self).__name__}.unroll: valid_length is not "
                                       "supported")
        axis = layout.find("T")
        steps = (list(inputs) if isinstance(inputs, (list, tuple))
                 else [inputs.take(nd.array([t]), axis=axis).reshape(
                     tuple(n for k, n in enumerate(inputs.shape) if k != axis))
                     for t in range(length)])
        if len(steps) != length:
            raise ShapeError(f"{type(self).__name__}.unroll: {len(steps)} steps given, "
                             f"length={length}")
        states = begin_state
        if states is None:
            states = self.begin_state(steps[0].shape[0], ctx=steps[0].context,
                                      dtype=steps[0].dtype)
        outputs = []
        for step in steps:
            out, states = self(step, states)
            outputs.append(out)
        if merge_outputs:
            return nd.stack(*outputs, axis=axis, num_args=len(outputs)), states
        return outputs, states


RecurrentCell = HybridRecurrentCell


class RNNCell(HybridRecurrentCell):
    """h' = activation(W x + b_i + U h + b_h)."""

    def __init__(self, hidden_size: int, activation: str = "tanh", **kwargs: Any) -> None:
        self._activation = activation
        super().__init__(hidden_size, **kwargs)

    def _alias(self) -> str:
        return "rnn"

    def hybrid_forward(self, F: Any, x: Any, h: Any, **params: Any) -> Any:  # noqa: N803
        i2h, h2h = self._projections(F, x, h, **params)
        return [F.Activation(i2h + h2h, act_type=self._activation, name=f"{self._prefix}out")]


class LSTMCell(HybridRecurrentCell):
    """Gates i, f, g, o; c' = f c + i g, h' = o tanh(c')."""

    _gates = 4

    def _alias(self) -> str:
        return "lstm"

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}] * 2

    def hybrid_forward(self, F: Any, x: Any, h: Any, c: Any, **params: Any) -> Any:  # noqa: N803
        i2h, h2h = self._projections(F, x, h, **params)
        gates = F.SliceChannel(i2h + h2h, num_outputs=4, name=f"{self._prefix}slice")
        in_gate = F.Activation(gates[0], act_type="sigmoid")
        forget_gate = F.Activation(gates[1], act_type="sigmoid")
        candidate = F.Activation(gates[2], act_type="tanh")
        out_gate = F.Activation(gates[3], act_type="sigmoid")
        next_c = forget_gate * c + in_gate * candidate
        next_h = out_gate * F.Activation(next_c, act_type="tanh")
        return [next_h, next_c]


class GRUCell(HybridRecurrentCell):
    """Gates r, z, n; n = tanh(W_n x + b_in + r (U_n h + b_hn)),
    h' = (1 - z) n + z h."""

    _gates = 3

    def _alias(self) -> str:
        return "gru"

    def hybrid_forward(self, F: Any, x: Any, h: Any, **params: Any) -> Any:  # noqa: N803
        i2h, h2h = self._projections(F, x, h, **params)
        i2h_r, i2h_z, i2h_n = (F.SliceChannel(i2h, num_outputs=3)[k] for k in range(3))
        h2h_r, h2h_z, h2h_n = (F.SliceChannel(h2h, num_outputs=3)[k] for k in range(3))
        reset = F.Activation(i2h_r + h2h_r, act_type="sigmoid")
        update = F.Activation(i2h_z + h2h_z, act_type="sigmoid")
        candidate = F.Activation(i2h_n + reset * h2h_n, act_type="tanh")
        return [(1 - update) * candidate + update * h]
