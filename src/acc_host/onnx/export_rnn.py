"""MXNet's fused RNN -> ONNX RNN/LSTM/GRU, one ONNX node per layer.

ONNX has no packed parameter vector: each layer's W (D, G*H, in), R
(D, G*H, H) and B (D, 2*G*H) are sliced out of the vector in the graph
(Slice of the flat parameters at the offsets of MXNet's layout, see
acc_host.ops.rnn), each gate block in ONNX's order (LSTM i, o, f, c from
MXNet's i, f, g, o; GRU z, r, h from r, z, n), and joined with Concat. A
layer's Y (T, D, N, H) becomes the next layer's input (T, N, D*H) by
Transpose and Reshape; the final states of the layers are concatenated
into MXNet's (L*D, N, H). rnn_relu and rnn_tanh are ONNX RNN with Relu or
Tanh, gru is GRU with linear_before_reset=1, and sequence_length is
sequence_lens (as int32). An LSTMP (projection_size) and the cell-state
clip have no ONNX form and are refused. gluon's _rnn_param_concat is a
Concat and SwapAxis a Transpose.
"""

from __future__ import annotations

from ..ops import registry
from ..ops.rnn import Layout, layout
from .export_builder import ExportUnsupported, GraphBuilder, OpNode
from .export_ops import exports

_ONNX_OP = {"rnn_relu": "RNN", "rnn_tanh": "RNN", "lstm": "LSTM", "gru": "GRU"}
# ONNX gate k is MXNet gate _FROM_MXNET[mode][k]
_FROM_MXNET = {"rnn_relu": (0,), "rnn_tanh": (0,), "lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}


def _offsets(sizes: Layout) -> tuple[list[list[int]], list[list[int]]]:
    """The offsets of every [layer][direction]'s i2h weight and i2h bias in
    the packed vector (h2h follows each)."""
    weights: list[list[int]] = []
    biases: list[list[int]] = []
    offset = 0
    for layer in range(sizes.layers):
        weights.append([])
        for _ in range(sizes.directions):
            weights[layer].append(offset)
            offset += sum(rows * cols for rows, cols in sizes.weight_shapes(layer))
    rows = sizes.gates * sizes.hidden
    for layer in range(sizes.layers):
        biases.append([])
        for _ in range(sizes.directions):
            biases[layer].append(offset)
            offset += 2 * rows
    return weights, biases


def _gates(g: GraphBuilder, vector: str, start: int, block: int, shape: list[int],
           mode: str) -> str:
    """The G blocks of block values from start, each reshaped to shape, in
    ONNX's gate order, joined along axis 0."""
    parts = []
    for gate in _FROM_MXNET[mode]:
        begin = start + gate * block
        piece = g.add1("Slice", [vector, g.int64s([begin]), g.int64s([begin + block]),
                                 g.int64s([0])])
        parts.append(g.reshape(piece, shape))
    return parts[0] if len(parts) == 1 else g.add1("Concat", parts, axis=0)


def _stacked(g: GraphBuilder, per_direction: list[str]) -> str:
    """(D, ...) from one tensor per direction."""
    parts = [g.unsqueeze(value, [0]) for value in per_direction]
    return parts[0] if len(parts) == 1 else g.add1("Concat", parts, axis=0)


@exports("RNN")
def rnn(g: GraphBuilder, n: OpNode) -> None:
    attrs = n.attrs
    if g.opset < 10:
        raise ExportUnsupported("RNN is exported from opset 10 on (Slice with inputs)")
    if attrs.projection_size:
        raise ExportUnsupported("an LSTM with projection_size has no ONNX form")
    if attrs.lstm_state_clip_min is not None or attrs.lstm_state_clip_max is not None:
        raise ExportUnsupported("lstm_state_clip_min/max have no ONNX form")
    steps, batch, _ = n.shape
    sizes = layout(attrs, n.shape[2])
    mode, hidden, dirs = attrs.mode, sizes.hidden, sizes.directions
    names = registry.get("RNN").argument_names(attrs)
    vector, state = n.inputs[1], n.inputs[2]
    cell = n.inputs[names.index("state_cell")] if "state_cell" in names else None
    lengths = ""
    if "sequence_length" in names:
        lengths = g.cast(n.inputs[names.index("sequence_length")], "int32")
    weight_at, bias_at = _offsets(sizes)
    node_attrs: dict = {"hidden_size": hidden,
                        "direction": "bidirectional" if dirs == 2 else "forward"}
    if mode in ("rnn_relu", "rnn_tanh"):
        node_attrs["activations"] = ["Relu" if mode == "rnn_relu" else "Tanh"] * dirs
    if mode == "gru":
        node_attrs["linear_before_reset"] = 1
    x, last_h, last_c = n.inputs[0], [], []
    rows = sizes.gates * hidden
    for layer in range(sizes.layers):
        width = sizes.layer_input(layer)
        w = _stacked(g, [_gates(g, vector, weight_at[layer][d], hidden * width,
                                [hidden, width], mode) for d in range(dirs)])
        r = _stacked(g, [_gates(g, vector, weight_at[layer][d] + rows * width,
                                hidden * hidden, [hidden, hidden], mode) for d in range(dirs)])
        b = _stacked(g, [g.add1("Concat", [
            _gates(g, vector, bias_at[layer][d], hidden, [hidden], mode),
            _gates(g, vector, bias_at[layer][d] + rows, hidden, [hidden], mode)], axis=0)
            for d in range(dirs)])
        span = [g.int64s([layer * dirs]), g.int64s([(layer + 1) * dirs]), g.int64s([0])]
        inputs = [x, w, r, b, lengths, g.add1("Slice", [state, *span])]
        if cell is not None:
            inputs.append(g.add1("Slice", [cell, *span]))
        outputs = g.add(_ONNX_OP[mode], inputs, 3 if mode == "lstm" else 2, **node_attrs)
        last_h.append(outputs[1])
        if mode == "lstm":
            last_c.append(outputs[2])
        # Y (T, D, N, H) -> (T, N, D*H): the next layer's input, or the output
        y = g.transpose(outputs[0], [0, 2, 1, 3])
        x = g.reshape(y, [steps, batch, dirs * hidden],
                      n.out if layer == sizes.layers - 1 else None)
    if attrs.state_outputs:
        for finals, out in ((last_h, n.outputs[1]), (last_c, n.outputs[2] if cell else None)):
            if out is None:
                continue
            if len(finals) == 1:
                g.identity(finals[0], out)
            else:
                g.add("Concat", finals, [out], axis=0)


@exports("_rnn_param_concat")
def rnn_param_concat(g: GraphBuilder, n: OpNode) -> None:
    g.add("Concat", n.inputs, [n.out], axis=n.attrs.dim % len(n.shape))


@exports("SwapAxis")
def swap_axis(g: GraphBuilder, n: OpNode) -> None:
    ndim = len(n.shape)
    perm = list(range(ndim))
    first, second = n.attrs.dim1 % ndim, n.attrs.dim2 % ndim
    perm[first], perm[second] = perm[second], perm[first]
    g.transpose(n.inputs[0], perm, n.out)
