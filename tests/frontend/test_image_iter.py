"""mx.io.ImageRecordIter and mx.image against MXNet 1.9.1: the batches
MXNet's iterator made over tests/mxnet_expected/imagerec/images.rec
(tools/mxnet_compat/make_imagerec_expected.py, side environment), and
MXNet's geometry rules for resize_short, scale_down and center_crop."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from support.paths import MXNET_EXPECTED, ROOT

import acc_host as mx

FOLDER = MXNET_EXPECTED / "imagerec"
_spec = importlib.util.spec_from_file_location(
    "make_imagerec_expected", ROOT / "tools" / "mxnet_compat" / "make_imagerec_expected.py")
assert _spec is not None and _spec.loader is not None
CASES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(CASES)


@pytest.mark.parametrize("index", range(len(CASES.ITERATORS)))
def test_batches_match_mxnet(index: int) -> None:
    expected = np.load(FOLDER / f"case{index}.npz")
    it = mx.io.ImageRecordIter(path_imgrec=str(FOLDER / "images.rec"),
                               **CASES.ITERATORS[index])
    batches = list(it)
    assert len(batches) == len([name for name in expected.files if name.startswith("data")])
    for number, batch in enumerate(batches):
        np.testing.assert_allclose(batch.data[0].asnumpy(), expected[f"data{number}"],
                                   rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(batch.label[0].asnumpy(), expected[f"label{number}"])
        assert batch.pad == int(expected[f"pad{number}"])
    it.reset()
    assert next(it).data[0].shape == expected["data0"].shape


def test_module_score_over_image_records() -> None:
    it = mx.io.ImageRecordIter(path_imgrec=str(FOLDER / "images.rec"), data_shape=(3, 8, 8),
                               batch_size=2)
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(mx.sym.flatten(data), num_hidden=4, name="fc")
    module = mx.mod.Module(net, label_names=None, context=mx.cpu_ref(0))
    module.bind(data_shapes=it.provide_data, for_training=False)
    module.init_params(mx.init.Xavier())
    (name, value), = module.score(it, "acc")
    assert name == "accuracy" and 0.0 <= value <= 1.0


def test_image_geometry_follows_mxnet() -> None:
    pixels = np.arange(10 * 14 * 3, dtype=np.uint8).reshape(10, 14, 3)
    image = mx.nd.array(pixels, dtype=np.uint8)
    assert mx.image.resize_short(image, 5).shape == (5, 7, 3)
    assert mx.image.scale_down((14, 10), (12, 12)) == (10, 10)
    crop, box = mx.image.center_crop(image, (6, 4))
    assert box == (4, 3, 6, 4)
    np.testing.assert_array_equal(crop.asnumpy(), pixels[3:7, 4:10])
    normalized = mx.image.color_normalize(mx.nd.array(pixels[:2, :2], dtype=np.float32),
                                          mx.nd.array([1.0, 2.0, 3.0]),
                                          mx.nd.array([2.0, 2.0, 2.0]))
    np.testing.assert_allclose(normalized.asnumpy(), (pixels[:2, :2] - [1, 2, 3]) / 2.0)
    decoded = mx.image.imread(FOLDER / "img0.png")
    assert decoded.shape == (10, 12, 3) and decoded.dtype == np.uint8
    np.testing.assert_array_equal(mx.image.imread(FOLDER / "img0.png", to_rgb=False).asnumpy(),
                                  decoded.asnumpy()[:, :, ::-1])


def test_bad_input_is_typed(tmp_path: Path) -> None:
    with pytest.raises(mx.ShapeError, match="smaller than data_shape"):
        next(mx.io.ImageRecordIter(path_imgrec=str(FOLDER / "images.rec"),
                                   data_shape=(3, 20, 20), batch_size=1))
    with pytest.raises(mx.InvalidArgumentError, match="evaluation"):
        mx.io.ImageRecordIter(path_imgrec=str(FOLDER / "images.rec"), data_shape=(3, 8, 8),
                              batch_size=1, rand_crop=True)
    (tmp_path / "bad.png").write_bytes(b"not an image")
    with pytest.raises(mx.ModelFileError):
        mx.image.imread(tmp_path / "bad.png")
