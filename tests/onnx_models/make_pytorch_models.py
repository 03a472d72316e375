"""Builds the PyTorch-exported ONNX models that tests/onnx/test_onnx_pytorch_models.py
checks (and benchmarks/onnx_pytorch_latency.py times).

Run it with a Python that has torch (it is not a dependency of acc-host, and
the main interpreter of this project must not have it):

    python3 -m venv /work/torchenv
    /work/torchenv/bin/pip install torch==2.13.0 onnx numpy
    /work/torchenv/bin/python tests/onnx_models/make_pytorch_models.py

It writes, next to itself, for each model NAME in MODELS:

* ``NAME.onnx``: the model exported in eval mode by torch.onnx.export's
  TorchScript exporter (``dynamo=False``), opset 17, static shapes, float32;
* ``NAME.npz``: a sample input (one array per ONNX graph input, under the
  input's name) and torch's own outputs for it (``output_0``, ``output_1``,
  ...), computed in eval mode under ``torch.no_grad()``.

Everything is seeded (``torch.manual_seed`` per model, numpy's default_rng
for the inputs), so running it again gives the same weights, inputs and
outputs on the same torch build. The models are small (each .onnx < 1 MB):

* ``resnet_small``: conv-BN-ReLU stem, three BasicBlocks (two with a stride-2
  1x1 conv-BN downsample shortcut), global average pool, linear head;
* ``dwsep_small``: MobileNet-v1-like depthwise-separable CNN: depthwise 3x3
  convolutions (groups = channels), pointwise 1x1 convolutions, BN, ReLU6;
* ``vit_small``: conv patch embedding (8x8 patches of a 32x32 image), class
  token, learned position embedding, two pre-norm transformer blocks with
  ``nn.MultiheadAttention``, GELU MLP, final LayerNorm and head;
* ``bert_small``: token + position + segment embeddings (Gather), LayerNorm,
  two post-norm encoder layers with hand-written self-attention and an
  attention-mask input, GELU in its erf form, and a tanh pooler; inputs
  ``input_ids``, ``token_type_ids``, ``attention_mask`` (int64), outputs the
  sequence output and the pooled output.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
OPSET = 17
BATCH = 2


def _randomize_batchnorm(module: nn.Module, generator: torch.Generator) -> None:
    """Non-trivial running statistics and affine parameters, so that BN is not
    an identity in eval mode."""
    for layer in module.modules():
        if isinstance(layer, nn.BatchNorm2d):
            channels = layer.num_features
            with torch.no_grad():
                layer.running_mean.copy_(torch.randn(channels, generator=generator) * 0.1)
                layer.running_var.copy_(torch.rand(channels, generator=generator) * 0.5 + 0.75)
                layer.weight.copy_(torch.rand(channels, generator=generator) * 0.5 + 0.75)
                layer.bias.copy_(torch.randn(channels, generator=generator) * 0.1)


# ---- ResNet-style -------------------------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNetSmall(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU())
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2),
                                    BasicBlock(32, 64, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.layers(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


# ---- depthwise-separable ------------------------------------------------------------------

def _conv_bn(cin: int, cout: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups,
                                   bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class DepthwiseSeparableSmall(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers = [_conv_bn(3, 16, 3, 2)]
        for cin, cout, stride in ((16, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2)):
            layers.append(_conv_bn(cin, cin, 3, stride, groups=cin))   # depthwise
            layers.append(_conv_bn(cin, cout, 1, 1))                    # pointwise
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


# ---- small ViT ----------------------------------------------------------------------------

class ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViTSmall(nn.Module):
    def __init__(self, image: int = 32, patch: int = 8, dim: int = 64, depth: int = 2,
                 heads: int = 4, mlp: int = 128, classes: int = 10) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        tokens = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*(ViTBlock(dim, heads, mlp) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)           # (B, tokens, dim)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


# ---- BERT-style encoder -------------------------------------------------------------------

class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, hidden)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + mask_bias
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        batch, _, seq, _ = context.shape
        context = context.permute(0, 2, 1, 3).reshape(batch, seq, self.heads * self.head_dim)
        return self.output(context)


class EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.gelu = nn.GELU()   # exact: 0.5 * x * (1 + erf(x / sqrt(2)))
        self.out = nn.Linear(intermediate, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x, mask_bias))
        return self.norm2(x + self.out(self.gelu(self.intermediate(x))))


class BertSmall(nn.Module):
    def __init__(self, vocab: int = 100, hidden: int = 64, layers: int = 2, heads: int = 4,
                 intermediate: int = 128, max_positions: int = 32, segments: int = 2) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.segment = nn.Embedding(segments, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, intermediate)
                                    for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)
        self.register_buffer("position_ids", torch.arange(max_positions).unsqueeze(0),
                             persistent=False)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = input_ids.shape[1]
        positions = self.position_ids[:, :seq]
        x = self.word(input_ids) + self.position(positions) + self.segment(token_type_ids)
        x = self.norm(x)
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


# ---- export -------------------------------------------------------------------------------

def _image(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input": rng.standard_normal((BATCH, 3, 32, 32)).astype(np.float32)}


def _tokens(rng: np.random.Generator) -> dict[str, np.ndarray]:
    seq = 16
    ids = rng.integers(1, 100, (BATCH, seq)).astype(np.int64)
    types = np.zeros((BATCH, seq), np.int64)
    types[:, seq // 2:] = 1
    mask = np.ones((BATCH, seq), np.int64)
    mask[1, 11:] = 0          # the second sequence is padded
    ids[1, 11:] = 0
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


# name -> (module class, sample-input maker, output names)
MODELS = {
    "resnet_small": (ResNetSmall, _image, ["logits"]),
    "dwsep_small": (DepthwiseSeparableSmall, _image, ["logits"]),
    "vit_small": (ViTSmall, _image, ["logits"]),
    "bert_small": (BertSmall, _tokens, ["sequence_output", "pooled_output"]),
}


def export(model: nn.Module, inputs: dict[str, np.ndarray], output_names: list[str],
           stem: Path, dynamic_axes: dict[str, dict[int, str]] | None = None) -> None:
    """Writes ``stem.onnx`` (model, in eval mode, exported with the inputs as
    its example) and ``stem.npz`` (the inputs and torch's outputs for them)."""
    model.eval()
    args = tuple(torch.from_numpy(value) for value in inputs.values())
    with torch.no_grad():
        outputs = model(*args)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    path = stem.with_suffix(".onnx")
    torch.onnx.export(model, args, str(path), input_names=list(inputs),
                      output_names=output_names, opset_version=OPSET, dynamo=False,
                      do_constant_folding=True, dynamic_axes=dynamic_axes)
    np.savez(stem.with_suffix(".npz"), **inputs,
             **{f"output_{i}": out.numpy() for i, out in enumerate(outputs)})
    print(f"{stem.name}: {path.stat().st_size / 1e3:.0f} kB, inputs "
          f"{ {k: v.shape for k, v in inputs.items()} }, outputs "
          f"{[tuple(o.shape) for o in outputs]}")


def build(name: str, seed: int) -> None:
    cls, make_inputs, output_names = MODELS[name]
    torch.manual_seed(seed)
    model = cls()
    _randomize_batchnorm(model, torch.Generator().manual_seed(seed + 1000))
    export(model, make_inputs(np.random.default_rng(seed)), output_names, HERE / name)


def main() -> None:
    torch.set_num_threads(1)
    for seed, name in enumerate(MODELS):
        build(name, seed)


if __name__ == "__main__":
    main()
