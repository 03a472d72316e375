"""Generates the gluon.rnn checkpoints of tests/models/rnn with MXNet 1.9.1.

Run with the side environment's Python (MXNet 1.9.1, numpy < 1.24), from this
folder: ``/work/mxenv/bin/python make_rnn_models.py``. Each model is
exported with HybridBlock.export (<name>-symbol.json, <name>-0000.params),
its parameters are also written by save_parameters (<name>.params, gluon's
own names such as l0_i2h_weight), and <name>-io.npz holds the inputs and
MXNet's outputs (in the order of the exported symbol's inputs and heads),
and for the layers the same at the extra shapes MORE_SHAPES (s<k>_ keys).
"""

import mxnet as mx
import numpy as np
from mxnet import gluon

SEQ, BATCH, FEATURES, HIDDEN = 5, 3, 6, 8
MORE_SHAPES = ((1, 1), (12, 2))  # (steps, batch) of the extra runs


def build(name, layer, with_states, layout="TNC"):
    mx.random.seed(7)
    np.random.seed(7)
    layer.initialize(mx.init.Uniform(0.5))
    layer.hybridize()
    shape = (SEQ, BATCH, FEATURES) if layout == "TNC" else (BATCH, SEQ, FEATURES)
    x = mx.nd.array(np.random.uniform(-1, 1, shape).astype(np.float32))
    inputs = {"data0": x.asnumpy()}
    if with_states:
        states = [mx.nd.array(np.random.uniform(-0.5, 0.5, s.shape).astype(np.float32))
                  for s in layer.begin_state(BATCH)]
        out, new_states = layer(x, states)
        outputs = [out] + list(new_states)
        for k, s in enumerate(states, start=1):
            inputs[f"data{k}"] = s.asnumpy()
    else:
        # called without states, gluon passes its zero begin states as
        # inputs: the export takes them as data1, ...
        outputs = [layer(x)]
        for k, s in enumerate(layer.begin_state(BATCH), start=1):
            inputs[f"data{k}"] = s.asnumpy()
    layer.export(name)
    layer.save_parameters(f"{name}.params")
    arrays = {f"input_{key}": value for key, value in inputs.items()}
    arrays.update({f"output_{k}": o.asnumpy() for k, o in enumerate(outputs)})
    # the same layer at other lengths and batches (with states, run imperatively:
    # a hybridized layer keeps the signature of its first call): s<k>_input_*,
    # s<k>_output_*
    layer.hybridize(active=False)
    for k, (steps, batch) in enumerate(MORE_SHAPES):
        shape = (steps, batch, FEATURES) if layout == "TNC" else (batch, steps, FEATURES)
        x = mx.nd.array(np.random.uniform(-1, 1, shape).astype(np.float32))
        states = [mx.nd.array(np.random.uniform(-0.5, 0.5, s.shape).astype(np.float32))
                  for s in layer.begin_state(batch)]
        out, new_states = layer(x, states)
        arrays[f"s{k}_input_data0"] = x.asnumpy()
        arrays.update({f"s{k}_input_data{j}": s.asnumpy() for j, s in enumerate(states, 1)})
        arrays.update({f"s{k}_output_{j}": o.asnumpy()
                       for j, o in enumerate([out, *new_states])})
    np.savez(f"{name}-io.npz", **arrays)
    print(name, [o.shape for o in outputs])


build("lstm_bi2", gluon.rnn.LSTM(HIDDEN, num_layers=2, bidirectional=True,
                                 input_size=FEATURES, prefix="lstm_bi2_"), True)
build("gru_bi2", gluon.rnn.GRU(HIDDEN, num_layers=2, bidirectional=True,
                               input_size=FEATURES, prefix="gru_bi2_"), False)
build("rnn_tanh_ntc", gluon.rnn.RNN(HIDDEN, num_layers=1, activation="tanh",
                                    input_size=FEATURES, layout="NTC",
                                    prefix="rnn_tanh_ntc_"), True, layout="NTC")
build("lstmp", gluon.rnn.LSTM(HIDDEN, num_layers=2, projection_size=5,
                              input_size=FEATURES, prefix="lstmp_"), True)


def build_cell(name, cell, steps=4):
    """A cell unrolled by hand for steps steps (inputs (steps, N, C)); saves
    its parameters (save_parameters) and every step's output and states."""
    mx.random.seed(11)
    np.random.seed(11)
    cell.initialize(mx.init.Uniform(0.5))
    x = np.random.uniform(-1, 1, (steps, BATCH, FEATURES)).astype(np.float32)
    states = [mx.nd.array(np.random.uniform(-0.5, 0.5, s.shape).astype(np.float32))
              for s in cell.begin_state(BATCH)]
    arrays = {"input_data": x}
    arrays.update({f"input_state{k}": s.asnumpy() for k, s in enumerate(states)})
    outputs = []
    for t in range(steps):
        out, states = cell(mx.nd.array(x[t]), states)
        outputs.append(out.asnumpy())
    arrays["output"] = np.stack(outputs)
    arrays.update({f"output_state{k}": s.asnumpy() for k, s in enumerate(states)})
    cell.save_parameters(f"{name}.params")
    np.savez(f"{name}-io.npz", **arrays)
    print(name, arrays["output"].shape)


build_cell("cell_rnn", gluon.rnn.RNNCell(HIDDEN, activation="tanh", input_size=FEATURES))
build_cell("cell_lstm", gluon.rnn.LSTMCell(HIDDEN, input_size=FEATURES))
build_cell("cell_gru", gluon.rnn.GRUCell(HIDDEN, input_size=FEATURES))
