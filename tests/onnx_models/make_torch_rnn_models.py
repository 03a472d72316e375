"""Exports the recurrent PyTorch models of tests/onnx_models (opset 17, the
TorchScript exporter: dynamo=False, which writes plain ONNX LSTM/GRU nodes).

Run with the side environment's Python, from this folder:
``/work/torchenv/bin/python make_torch_rnn_models.py``. Sequence length and
batch are dynamic axes; each model ships with one sample input and torch's
outputs for it (.npz); the tests run other lengths and batches against
onnxruntime.
"""

import numpy as np
import torch

FEATURES, HIDDEN = 6, 8


class Recurrent(torch.nn.Module):
    """A two-layer bidirectional LSTM or GRU with given initial states, and a
    Linear head on its output."""

    def __init__(self, kind, batch_first):
        super().__init__()
        cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
        self.rnn = cls(FEATURES, HIDDEN, num_layers=2, bidirectional=True,
                       batch_first=batch_first)
        self.head = torch.nn.Linear(2 * HIDDEN, 3)
        self.kind = kind

    def forward(self, x, h0, *rest):
        if self.kind == "lstm":
            out, (h, c) = self.rnn(x, (h0, rest[0]))
            return self.head(out), h, c
        out, h = self.rnn(x, h0)
        return self.head(out), h


def export(name, kind, batch_first, steps=5, batch=2):
    torch.manual_seed(0)
    model = Recurrent(kind, batch_first).eval()
    x = torch.randn(batch, steps, FEATURES) if batch_first else torch.randn(steps, batch, FEATURES)
    states = [torch.randn(4, batch, HIDDEN) * 0.5 for _ in range(2 if kind == "lstm" else 1)]
    names = ["input", "h0", "c0"][:1 + len(states)]
    outputs = ["output", "hn", "cn"][:1 + len(states)]
    seq_axes = {0: "batch", 1: "steps"} if batch_first else {0: "steps", 1: "batch"}
    axes = {"input": seq_axes, "output": seq_axes}
    axes.update({n: {1: "batch"} for n in names[1:] + outputs[1:]})
    torch.onnx.export(model, (x, *states), f"{name}.onnx", input_names=names,
                      output_names=outputs, dynamic_axes=axes, opset_version=17,
                      dynamo=False)
    with torch.no_grad():
        result = model(x, *states)
    arrays = {n: t.numpy() for n, t in zip(names, (x, *states))}
    arrays.update({f"output_{k}": t.numpy() for k, t in enumerate(result)})
    np.savez(f"{name}.npz", **arrays)
    print(name, [t.shape for t in result])


export("lstm_bi2", "lstm", batch_first=False)
export("gru_bi2_batch_first", "gru", batch_first=True)
