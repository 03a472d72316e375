"""Exports the PyTorch model zoo that the performance suite compares with
onnxruntime: the CNNs and transformers users bring, at their real sizes.

Run it with a Python that has torch and torchvision (neither is a dependency of
acc-host, and the project's own interpreter must not have them):

    python3 -m venv /path/to/torchenv
    /path/to/torchenv/bin/pip install torch torchvision onnx numpy
    /path/to/torchenv/bin/python benchmarks/zoo/export_torch_zoo.py [--out DIR] [NAME ...]

For each model NAME it writes into --out (default: benchmarks/zoo/models, which
git ignores; the files are 10-350 MB each and are not shipped):

* ``NAME.onnx``: the model in eval mode, exported by torch.onnx.export's
  TorchScript exporter (``dynamo=False``), opset 17, float32, with the batch
  axis of every input and output symbolic (``batch``), weights constant-folded;
* ``NAME.npz``: a sample input at batch 2 (one array per graph input, under the
  input's name) and torch's outputs for it (``output_0``, ...).

Weights are random (seeded per model); BatchNorm layers get non-trivial
running statistics so that they are not identities. The models:

* ``resnet18``, ``resnet50``, ``mobilenet_v2``, ``mobilenet_v3_large``,
  ``efficientnet_b0``: torchvision's definitions, 224x224 RGB input;
* ``vit_s16``: torchvision's VisionTransformer at ViT-S/16 size (12 layers,
  hidden 384, 6 heads, MLP 1536), 224x224 input;
* ``bert_base``: a BERT-base-shaped encoder (12 layers, hidden 768, 12 heads,
  intermediate 3072, vocabulary 30522, sequence 128) built from the classes of
  tests/onnx_models/make_pytorch_models.py, with an attention-mask input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torchvision
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests" / "onnx_models"))
from make_pytorch_models import BertSmall, _randomize_batchnorm, export  # noqa: E402

SAMPLE_BATCH = 2
SEQUENCE = 128


def _image(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input": rng.standard_normal((SAMPLE_BATCH, 3, 224, 224)).astype(np.float32)}


def _tokens(rng: np.random.Generator) -> dict[str, np.ndarray]:
    ids = rng.integers(1, 30522, (SAMPLE_BATCH, SEQUENCE)).astype(np.int64)
    types = np.zeros((SAMPLE_BATCH, SEQUENCE), np.int64)
    types[:, SEQUENCE // 2:] = 1
    mask = np.ones((SAMPLE_BATCH, SEQUENCE), np.int64)
    mask[1, 100:] = 0          # the second sequence is padded
    ids[1, 100:] = 0
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


def _vit_s16() -> nn.Module:
    model = torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=12,
                                                 num_heads=6, hidden_dim=384, mlp_dim=1536)
    # torchvision starts the classification head at zero (every output 0,
    # whatever the input): random, so that comparing outputs checks something
    with torch.no_grad():
        model.heads.head.weight.normal_(0.0, 0.05)
        model.heads.head.bias.normal_(0.0, 0.05)
    return model


def _bert_base() -> nn.Module:
    return BertSmall(vocab=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                     max_positions=512)


ModelSpec = tuple[Callable[[], nn.Module], Callable[[np.random.Generator], dict[str, np.ndarray]],
                  list[str]]

MODELS: dict[str, ModelSpec] = {
    "resnet18": (torchvision.models.resnet18, _image, ["logits"]),
    "resnet50": (torchvision.models.resnet50, _image, ["logits"]),
    "mobilenet_v2": (torchvision.models.mobilenet_v2, _image, ["logits"]),
    "mobilenet_v3_large": (torchvision.models.mobilenet_v3_large, _image, ["logits"]),
    "efficientnet_b0": (torchvision.models.efficientnet_b0, _image, ["logits"]),
    "vit_s16": (_vit_s16, _image, ["logits"]),
    "bert_base": (_bert_base, _tokens, ["sequence_output", "pooled_output"]),
}


def export_zoo_model(name: str, seed: int, out: Path) -> None:
    make_model, make_inputs, output_names = MODELS[name]
    torch.manual_seed(seed)
    model = make_model()
    _randomize_batchnorm(model, torch.Generator().manual_seed(seed + 1000))
    inputs = make_inputs(np.random.default_rng(seed))
    export(model, inputs, output_names, out / name,
           dynamic_axes={key: {0: "batch"} for key in [*inputs, *output_names]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "models")
    parser.add_argument("names", nargs="*", choices=[[], *MODELS], default=[])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    for seed, name in enumerate(MODELS):
        if not args.names or name in args.names:
            export_zoo_model(name, seed, args.out)


if __name__ == "__main__":
    main()
