"""Exports the PyTorch control-flow models of this folder to ONNX.

Run with the side environment's Python (PyTorch and onnx):
``/work/torchenv/bin/python tests/models/control_flow/make_pytorch_models.py``.
The modules are scripted (torch.jit.script) so that their Python control
flow becomes ONNX control flow, and exported with the TorchScript exporter
(``dynamo=False``), opset 17, with a dynamic batch (and sequence) axis:

* ``torch_if.onnx``: a data-dependent ``If``: relu(a(x)) when x.sum() > 0,
  else 2 * b(x) - 1.
* ``torch_loop.onnx``: a scripted ``for`` over the sequence axis (an ONNX
  Loop whose trip count is the input's length, a tanh RNN cell in its
  body, the state carried) returning the last state and the sum of states.
* ``torch_while.onnx``: a scripted ``while`` with a data-dependent
  condition (an ONNX Loop with a condition and a trip limit, the condition
  an ``If`` inside the body): the state grows (x = 0.1 lin(x) + 1.5 x +
  0.5) until its mean absolute value passes 4 or 12 iterations ran;
  returns the state and the number of iterations.

Weights come from torch.manual_seed(0); onnxruntime is the oracle the
tests compare against (tests/onnx/test_control_flow_onnx.py).
"""

import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class IfModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 6)
        self.b = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            y = torch.relu(self.a(x))
        else:
            y = self.b(x) * 2.0 - 1.0
        return y


class LoopModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 12)
        self.rec = nn.Linear(12, 12, bias=False)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        total = h * 0.0  # (not zeros_like: a ConstantOfShape of a Shape needs dynamic shapes)
        for t in range(x.size(0)):
            h = torch.tanh(self.inp(x[t]) + self.rec(h))
            total = total + h
        return h, total


class WhileModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        steps = torch.zeros(1, dtype=torch.int64)
        i = 0
        while bool(x.abs().mean() < 4.0) and i < 12:
            x = self.lin(x) * 0.1 + x * 1.5 + 0.5
            steps = steps + 1
            i += 1
        return x, steps


def export(module: nn.Module, args: tuple, name: str, inputs: list[str], outputs: list[str],
           dynamic: dict) -> None:
    scripted = torch.jit.script(module.eval())
    torch.onnx.export(scripted, args, os.path.join(HERE, name), input_names=inputs,
                      output_names=outputs, dynamic_axes=dynamic, opset_version=17,
                      dynamo=False)


def main() -> None:
    torch.manual_seed(0)
    export(IfModel(), (torch.randn(3, 8),), "torch_if.onnx", ["x"], ["y"],
           {"x": {0: "batch"}, "y": {0: "batch"}})
    export(LoopModel(), (torch.randn(5, 2, 8), torch.zeros(2, 12)), "torch_loop.onnx",
           ["x", "h"], ["h_last", "total"],
           {"x": {0: "time", 1: "batch"}, "h": {0: "batch"}, "h_last": {0: "batch"},
            "total": {0: "batch"}})
    export(WhileModel(), (torch.randn(2, 6),), "torch_while.onnx", ["x"], ["y", "steps"],
           {"x": {0: "batch"}, "y": {0: "batch"}})


if __name__ == "__main__":
    main()
