"""Real MXNet 1.9.1 models (tests/models, written by MXNet itself) run on
the CPU path and match the outputs MXNet computed, through Module (the
proposal's example) and through simple_bind."""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
from support.paths import MODELS

import acc_host as mx

NAMES = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes"]
RTOL, ATOL = 1e-4, 1e-5


def _fixture(name: str) -> tuple[str, np.ndarray, list[np.ndarray], dict]:
    folder = MODELS / name
    meta = json.loads((folder / "meta.json").read_text())
    expected = [np.load(folder / f"expected_{k}.npy")
                for k in range(len(list(folder.glob("expected_*.npy"))))]
    return str(folder / "model"), np.load(folder / "input_0.npy"), expected, meta


@pytest.mark.parametrize("name", NAMES)
def test_module_matches_mxnet(name: str) -> None:
    prefix, image, expected, _ = _fixture(name)
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    mod = mx.mod.Module(symbol=sym, context=mx.cpu(), label_names=None)
    mod.bind(data_shapes=[("data", image.shape)], label_shapes=mod.label_shapes,
             for_training=False)
    mod.set_params(arg_params, aux_params, allow_missing=True)
    Batch = namedtuple("Batch", ["data", "label"])
    mod.forward(Batch([mx.nd.array(image)], None))
    outputs = mod.get_outputs()
    assert len(outputs) == len(expected)
    for output, reference in zip(outputs, expected):
        np.testing.assert_allclose(output.asnumpy(), reference, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", NAMES)
def test_simple_bind_matches_mxnet_at_batch_3(name: str) -> None:
    """Axis 0 is free: a batch of three copies gives three copies of the
    expected output, and reshape() moves between batch sizes."""
    prefix, image, expected, _ = _fixture(name)
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    exe = sym.simple_bind(mx.cpu(), data=image.shape)
    for name_, value in arg_params.items():
        exe.arg_dict[name_][:] = value
    for name_, value in aux_params.items():
        exe.aux_dict[name_][:] = value
    exe.forward(is_train=False, data=image)
    for output, reference in zip(exe.outputs, expected):
        np.testing.assert_allclose(output.asnumpy(), reference, rtol=RTOL, atol=ATOL)
    batch = np.concatenate([image] * 3)
    bigger = exe.reshape(allow_up_sizing=True, data=batch.shape)
    bigger.forward(data=batch)
    for output, reference in zip(bigger.outputs, expected):
        np.testing.assert_allclose(output.asnumpy(), np.concatenate([reference] * 3),
                                   rtol=RTOL, atol=ATOL)
    report = exe.memory_report()
    assert 0 < report["planned_peak"] < report["unplanned"]


def test_checkpoint_round_trip_is_byte_identical(tmp_path: Path) -> None:
    for name in NAMES:
        prefix, _, _, _ = _fixture(name)
        sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
        out = tmp_path / name
        mx.model.save_checkpoint(str(out), 0, sym, arg_params, aux_params)
        assert Path(f"{out}-symbol.json").read_bytes() == Path(f"{prefix}-symbol.json").read_bytes()
        original = mx.nd.load(f"{prefix}-0000.params")
        again = mx.nd.load(f"{out}-0000.params")
        # save_checkpoint writes arguments before auxiliary states, as MXNet's does.
        assert sorted(original) == sorted(again)
        assert [key for key in again if key.startswith("aux:")] == list(again)[len(arg_params):]
        for key in original:
            np.testing.assert_array_equal(original[key].asnumpy(), again[key].asnumpy())
            assert original[key].dtype == again[key].dtype
        # Through mx.nd.save with the loaded order, the file comes back byte for byte.
        mx.nd.save(tmp_path / f"{name}.params", original)
        assert (tmp_path / f"{name}.params").read_bytes() == \
            Path(f"{prefix}-0000.params").read_bytes()
