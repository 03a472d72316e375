"""An executor bound with sparse arguments (a csr data input, a row_sparse
embedding weight from a checkpoint MXNet 1.9.1 wrote) reads them as their
dense values (MXNet's storage fallback), on the CPU and on cpu_ref."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import acc_host as mx

CHECKPOINT = Path(__file__).resolve().parents[1] / "models" / "sparse" / "sparse_ckpt"


@pytest.mark.parametrize("ctx", [mx.cpu(), mx.cpu_ref(0)], ids=str)
def test_wide_and_embedding_checkpoint_runs_with_sparse_arguments(ctx: mx.Context) -> None:
    symbol, args, _ = mx.model.load_checkpoint(str(CHECKPOINT), 0)
    assert args["embed_weight"].stype == "row_sparse"
    rng = np.random.default_rng(39)
    features = rng.random((4, 6)).astype(np.float32) * (rng.random((4, 6)) < 0.3)
    tokens = np.array([[1, 3], [0, 2], [5, 5], [1, 1]], dtype=np.float32)
    data = mx.nd.array(features).tostype("csr")
    exe = symbol.bind(ctx, {"data": data, "tok": mx.nd.array(tokens), **args})
    wide, deep = exe.forward(data=data, tok=mx.nd.array(tokens))
    weight, bias = args["wide_weight"].asnumpy(), args["wide_bias"].asnumpy()
    np.testing.assert_allclose(wide.asnumpy(), features @ weight.T + bias, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(deep.asnumpy(),
                                  args["embed_weight"].asnumpy()[tokens.astype(int)])
    other = np.ones((4, 6), dtype=np.float32)
    wide, _ = exe.forward(data=mx.nd.array(other).tostype("csr"), tok=mx.nd.array(tokens))
    np.testing.assert_allclose(wide.asnumpy(), other @ weight.T + bias, rtol=1e-5)
