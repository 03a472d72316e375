"""Builds the dynamic-shape ONNX models that tests/onnx/test_dynamic_models.py
and tests/runtime/test_dynamic_rebind.py check (and
benchmarks/dynamic_shapes.py times).

Run it with a Python that has torch (not a dependency of acc-host):

    /work/torchenv/bin/python tests/onnx_models/dynamic/make_dynamic_models.py

It writes, next to itself, for each model NAME:

* ``NAME.onnx``: exported in eval mode by torch.onnx.export's TorchScript
  exporter (``dynamo=False``), opset 17, float32, with ``dynamic_axes`` (the
  graph inputs' symbolic dimensions are ONNX ``dim_param``s, and the shape
  arithmetic PyTorch traces on them is in the graph: Shape, Gather,
  Concat, Reshape, Resize by computed sizes, ...);
* ``NAME.npz``: torch's own outputs at several input shapes, under
  ``input_<k>`` and ``output_<k>`` (k = 0, 1, ...), computed under
  ``torch.no_grad()``.

Seeded (``torch.manual_seed``, numpy's default_rng), small (< 200 kB each):

* ``cnn_dynamic``: conv-BN-ReLU, a stride-2 conv, ``interpolate(scale_factor=2,
  mode="nearest")`` and a bilinear ``interpolate(scale_factor=0.5)``, a
  skip connection, global average pooling, a linear head and a 1x1 conv map;
  input ``image`` (batch, 3, height, width), all three dynamic;
* ``encoder_dynamic``: two pre-norm transformer encoder layers (width 64, 4
  heads, GELU MLP of 128) with the attention written out (every reshape by
  sizes taken from ``x.shape``), over a learned position embedding sliced
  to the sequence length (``pos[:, :x.shape[1]]``), a final LayerNorm and a
  projection split into heads; input ``tokens`` (batch, sequence, 64),
  sequence and batch dynamic.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

HERE = Path(__file__).resolve().parent
OPSET = 17


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU())
        self.fuse = nn.Conv2d(48, 16, 3, 1, 1)
        self.head = nn.Linear(16, 10)
        self.map = nn.Conv2d(16, 4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.stem(x)
        d = self.down(s)
        u = F.interpolate(d, scale_factor=2.0, mode="nearest")
        u = u[:, :, :s.shape[2], :s.shape[3]]
        f = F.relu(self.fuse(torch.cat([s, u], dim=1)))
        small = F.interpolate(f, scale_factor=0.5, mode="bilinear", align_corners=False)
        pooled = small.mean(dim=(2, 3))
        return self.head(pooled), self.map(f)


class Block(nn.Module):
    """A pre-norm transformer encoder layer with its attention written out, so
    that every reshape takes its sizes from the input's shape (the legacy
    exporter records nn.MultiheadAttention's sequence length as a constant)."""

    def __init__(self, width: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)
        attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(64, 4, 128), Block(64, 4, 128))
        self.pos = nn.Parameter(torch.randn(1, 256, 64) * 0.1)
        self.norm = nn.LayerNorm(64)
        self.out = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.pos[:, :x.shape[1]]
        y = self.norm(self.blocks(x))
        b, t, c = y.shape
        heads = self.out(y).reshape(b, t, 4, c // 4).transpose(1, 2)
        return heads.reshape(b * 4, t, c // 4)


def _export(name: str, model: nn.Module, input_name: str, sample: torch.Tensor,
            dynamic: dict[int, str], outputs: list[str], shapes: list[tuple[int, ...]]) -> None:
    model.eval()
    path = HERE / f"{name}.onnx"
    torch.onnx.export(model, (sample,), str(path), input_names=[input_name],
                      output_names=outputs, opset_version=OPSET, dynamo=False,
                      dynamic_axes={input_name: dynamic, **{o: {0: "batch"} for o in outputs}})
    rng = np.random.default_rng(0)
    arrays = {}
    with torch.no_grad():
        for k, shape in enumerate(shapes):
            x = rng.standard_normal(shape).astype(np.float32)
            result = model(torch.from_numpy(x))
            result = result if isinstance(result, tuple) else (result,)
            arrays[f"input_{k}"] = x
            for j, value in enumerate(result):
                arrays[f"output_{k}_{j}"] = value.numpy()
    np.savez(HERE / f"{name}.npz", **arrays)


def main() -> None:
    torch.manual_seed(0)
    cnn = CNN()
    with torch.no_grad():
        bn = cnn.stem[1]
        bn.running_mean.copy_(torch.randn(16) * 0.1)
        bn.running_var.copy_(torch.rand(16) * 0.5 + 0.75)
    _export("cnn_dynamic", cnn, "image", torch.randn(2, 3, 32, 32),
            {0: "batch", 2: "height", 3: "width"}, ["logits", "features"],
            [(2, 3, 32, 32), (1, 3, 48, 40), (3, 3, 24, 56), (1, 3, 17, 23)])
    torch.manual_seed(1)
    _export("encoder_dynamic", Encoder(), "tokens", torch.randn(2, 16, 64),
            {0: "batch", 1: "sequence"}, ["heads"],
            [(2, 16, 64), (1, 40, 64), (3, 7, 64), (1, 128, 64)])


if __name__ == "__main__":
    main()
