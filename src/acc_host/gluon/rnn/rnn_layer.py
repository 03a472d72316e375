"""gluon.rnn.RNN, LSTM and GRU: stacked recurrent layers that run as MXNet's
fused ``RNN`` operator, with MXNet 1.9's parameters and calling convention.

Parameters are ``{l|r}{layer}_{i2h|h2h}_{weight|bias}`` (and ``h2r_weight``
for an LSTMP), prefixed by the block's prefix (``lstm0_l0_i2h_weight``), so a
file written by MXNet's save_parameters or export loads as it is. A forward
joins them, flattened, with ``_rnn_param_concat`` in MXNet's packed order
(every weight, then every bias; layer by layer, left then right) and calls
``RNN`` with state_outputs; layout "NTC" swaps the batch and time axes
around it. ``layer(x)`` returns the output; ``layer(x, states)`` returns
(output, new states), states being a list ([h] or [h, c] for lstm) of
(num_layers * directions, batch, hidden) arrays; with
use_sequence_length, ``layer(x, states, sequence_length)``. save_parameters
and load_parameters use the structural names MXNet 1.9 writes for these
layers (``_unfused.0.l_cell.i2h_weight``; see _collect_params_with_prefix).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ... import ndarray as nd
from ... import symbol as sym
from ...errors import InvalidArgumentError, ShapeError
from ..block import HybridBlock
from ..parameter import Parameter

__all__ = ["RNN", "LSTM", "GRU"]

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


class _RNNLayer(HybridBlock):
    def __init__(self, hidden_size: int, num_layers: int, layout: str, dropout: float,
                 bidirectional: bool, input_size: int, i2h_weight_initializer: Any,
                 h2h_weight_initializer: Any, i2h_bias_initializer: Any,
                 h2h_bias_initializer: Any, mode: str, projection_size: int | None,
                 h2r_weight_initializer: Any, lstm_state_clip_min: float | None,
                 lstm_state_clip_max: float | None, lstm_state_clip_nan: bool,
                 dtype: Any, use_sequence_length: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if layout not in ("TNC", "NTC"):
            raise InvalidArgumentError(f"{type(self).__name__}: layout must be 'TNC' or "
                                       f"'NTC', got {layout!r}")
        if projection_size is not None and mode != "lstm":
            raise InvalidArgumentError(f"{type(self).__name__}: projection_size is only "
                                       "supported by LSTM")
        self._hidden_size, self._num_layers, self._layout = hidden_size, num_layers, layout
        self._dropout, self._dir, self._mode = dropout, 2 if bidirectional else 1, mode
        self._input_size, self._projection_size = input_size, projection_size
        self._clip = (lstm_state_clip_min, lstm_state_clip_max, lstm_state_clip_nan)
        self._use_sequence_length, self._dtype = use_sequence_length, dtype
        gates, out_hidden = _GATES[mode], projection_size or hidden_size
        with self.name_scope():
            features = input_size
            for layer in range(num_layers):
                for direction in ("l", "r")[:self._dir]:
                    rows = gates * hidden_size
                    self._param(f"{direction}{layer}_i2h_weight", (rows, features),
                                i2h_weight_initializer)
                    self._param(f"{direction}{layer}_h2h_weight", (rows, out_hidden),
                                h2h_weight_initializer)
                    self._param(f"{direction}{layer}_i2h_bias", (rows,), i2h_bias_initializer)
                    self._param(f"{direction}{layer}_h2h_bias", (rows,), h2h_bias_initializer)
                    if projection_size is not None:
                        self._param(f"{direction}{layer}_h2r_weight",
                                    (projection_size, hidden_size), h2r_weight_initializer)
                features = out_hidden * self._dir

    def _param(self, name: str, shape: tuple[int, ...], init: Any) -> None:
        setattr(self, name, self.params.get(name, shape=shape, init=init, dtype=self._dtype,
                                            allow_deferred_init=True))

    def __repr__(self) -> str:
        sizes = f"{self._input_size or None} -> {self._hidden_size}"
        extra = ", bidirectional" if self._dir == 2 else ""
        return (f"{type(self).__name__}({sizes}, {self._layout}, "
                f"num_layers={self._num_layers}{extra})")

    def _collect_params_with_prefix(self, prefix: str = "") -> OrderedDict[str, Parameter]:
        """The structural names MXNet 1.9's save_parameters writes for a
        fused layer (those of its unfused cells): ``_unfused.<layer>.<l|r>_cell.
        i2h_weight`` when bidirectional, ``_unfused.<layer>.i2h_weight`` else."""
        if prefix:
            prefix += "."
        collected: OrderedDict[str, Parameter] = OrderedDict()
        for key, param in self._reg_params.items():
            direction, layer, name = key[0], int(key[1:key.index("_")]), key[key.index("_") + 1:]
            cell = f"{direction}_cell." if self._dir == 2 else ""
            collected[f"{prefix}_unfused.{layer}.{cell}{name}"] = param
        return collected

    def state_info(self, batch_size: int = 0) -> list[dict[str, Any]]:
        out_hidden = self._projection_size or self._hidden_size
        info = [{"shape": (self._num_layers * self._dir, batch_size, out_hidden),
                 "__layout__": "LNC"}]
        if self._mode == "lstm":
            info.append({"shape": (self._num_layers * self._dir, batch_size, self._hidden_size),
                         "__layout__": "LNC"})
        return info

    def begin_state(self, batch_size: int = 0, func: Any = None, **kwargs: Any) -> list[Any]:
        """Zero states (or func(shape=..., **kwargs)) for a batch."""
        make = func or nd.zeros
        kwargs.setdefault("dtype", self._dtype)
        return [make(shape=info["shape"], **kwargs) for info in self.state_info(batch_size)]

    def _finish_input_size(self, features: int) -> None:
        """Layer 0's i2h weights learn the input width at the first forward."""
        for direction in ("l", "r")[:self._dir]:
            param = self._reg_params[f"{direction}0_i2h_weight"]
            if param.shape is not None and param.shape[1] == 0:
                param.shape = (param.shape[0], features)
            param._finish_deferred_init()

    def __call__(self, inputs: Any, states: Any = None, sequence_length: Any = None) -> Any:
        skip_states = states is None
        is_symbol = isinstance(inputs, sym.Symbol)
        if not is_symbol:
            if not isinstance(inputs, nd.NDArray) or len(inputs.shape) != 3:
                raise ShapeError(f"{type(self).__name__}: inputs must be a 3-D NDArray "
                                 f"({self._layout}), got "
                                 f"{getattr(inputs, 'shape', type(inputs).__name__)}")
            self._finish_input_size(inputs.shape[2])
        if states is None:
            if is_symbol:
                raise InvalidArgumentError(f"{type(self).__name__}: give the begin states "
                                           "when calling with Symbols")
            batch = inputs.shape[self._layout.find("N")]
            states = self.begin_state(batch, ctx=inputs.context, dtype=inputs.dtype)
        if isinstance(states, (nd.NDArray, sym.Symbol)):
            states = [states]
        states = list(states)
        if not is_symbol:
            batch = inputs.shape[self._layout.find("N")]
            for state, info in zip(states, self.state_info(batch)):
                if tuple(state.shape) != info["shape"]:
                    raise ShapeError(f"{type(self).__name__}: invalid recurrent state shape: "
                                     f"expected {info['shape']}, got {tuple(state.shape)}")
        extra = [sequence_length] if self._use_sequence_length else []
        if self._use_sequence_length and sequence_length is None:
            raise InvalidArgumentError(f"{type(self).__name__}: use_sequence_length=True "
                                       "needs sequence_length")
        self.__dict__["_state_count"] = len(states)
        result = super().__call__(inputs, *states, *extra)
        flat = list(result) if isinstance(result, (list, tuple)) else [result]
        if skip_states:
            return flat[0]
        return flat[0], flat[1:]

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N803
        inputs = x
        count = self.__dict__.get("_state_count", 2 if self._mode == "lstm" else 1)
        states, extra = list(args[:count]), list(args[count:])
        if self._layout == "NTC":
            inputs = F.swapaxes(inputs, dim1=0, dim2=1)
        roles = ["i2h", "h2h"] + (["h2r"] if self._projection_size is not None else [])
        names = [f"{direction}{layer}_{role}_{kind}"
                 for kind in ("weight", "bias") for layer in range(self._num_layers)
                 for direction in ("l", "r")[:self._dir] for role in roles
                 if not (role == "h2r" and kind == "bias")]
        flat = [F.Reshape(kwargs[name], shape=(-1,)) for name in names]
        params = F._rnn_param_concat(*flat, dim=0, num_args=len(flat))
        low, high, nan = self._clip
        rnn = F.RNN(inputs, params, *states, *extra, state_size=self._hidden_size,
                    projection_size=self._projection_size, num_layers=self._num_layers,
                    bidirectional=self._dir == 2, p=self._dropout, state_outputs=True,
                    mode=self._mode, lstm_state_clip_min=low, lstm_state_clip_max=high,
                    lstm_state_clip_nan=nan, use_sequence_length=self._use_sequence_length)
        outputs = [rnn[k] for k in range(3 if self._mode == "lstm" else 2)]
        if self._layout == "NTC":
            outputs[0] = F.swapaxes(outputs[0], dim1=0, dim2=1)
        return outputs


class RNN(_RNNLayer):
    """Elman RNN layers with tanh or relu (MXNet's gluon.rnn.RNN)."""

    def __init__(self, hidden_size: int, num_layers: int = 1, activation: str = "relu",
                 layout: str = "TNC", dropout: float = 0, bidirectional: bool = False,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 input_size: int = 0, dtype: Any = "float32", **kwargs: Any) -> None:
        if activation not in ("relu", "tanh"):
            raise InvalidArgumentError(f"RNN: activation must be 'relu' or 'tanh', got "
                                       f"{activation!r}")
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "rnn_" + activation, None, None, None, None,
                         False, dtype, **kwargs)


class LSTM(_RNNLayer):
    """LSTM layers, optionally with a projection (LSTMP); gates i, f, g, o."""

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC",
                 dropout: float = 0, bidirectional: bool = False, input_size: int = 0,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 projection_size: int | None = None, h2r_weight_initializer: Any = None,
                 state_clip_min: float | None = None, state_clip_max: float | None = None,
                 state_clip_nan: bool = False, dtype: Any = "float32",
                 use_sequence_length: bool = False, **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "lstm", projection_size, h2r_weight_initializer,
                         state_clip_min, state_clip_max, state_clip_nan, dtype,
                         use_sequence_length, **kwargs)


class GRU(_RNNLayer):
    """GRU layers (MXNet's and cuDNN's GRU: the reset gate applies after the
    recurrent product); gates r, z, n."""

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC",
                 dropout: float = 0, bidirectional: bool = False, input_size: int = 0,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 dtype: Any = "float32", use_sequence_length: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "gru", None, None, None, None, False, dtype,
                         use_sequence_length, **kwargs)
