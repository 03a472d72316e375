"""cpu_ref retains weights (mxnet_acc.h retainsWeights, ABI 1.1): it reads
the host's weight buffers in place instead of copying them, the host keeps
them alive until unloadModel, and a weight written later is given again
and used. The memory saved is measured by benchmarks/retained_weights.py
(marked slow here)."""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.tensor import TensorSpec
from acc_host.plugins import registry

ROOT = Path(__file__).resolve().parents[3]


def _net() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    return mx.sym.FullyConnected(mx.sym.Activation(conv, act_type="relu", name="relu"),
                                 num_hidden=5, name="fc")


def _values(exe: mx.executor.Executor, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(array.shape).astype(np.float32)
            for name, array in exe.arg_dict.items()}


def _cpu(values: dict[str, np.ndarray]) -> np.ndarray:
    exe = _net().simple_bind(mx.cpu(), data=values["data"].shape)
    return exe.forward(**{name: mx.nd.array(value) for name, value in values.items()})[0].asnumpy()


def test_cpu_ref_retains_and_uses_updated_weights() -> None:
    library = mx.cpu_ref(0).library
    assert library.retains_weights and library.gives_reasons
    exe = _net().simple_bind(mx.cpu_ref(0), data=(2, 3, 6, 6))
    first = _values(exe, 1)
    for name, value in first.items():
        exe.arg_dict[name][:] = value
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), _cpu(first), rtol=1e-4, atol=1e-5)
    (model,) = [op.model for op in exe.subgraphs]
    weights = sum(value.nbytes for name, value in first.items() if name != "data")
    assert model.retained_bytes == weights
    second = {**first, "fc_weight": _values(exe, 2)["fc_weight"]}
    exe.arg_dict["fc_weight"][:] = second["fc_weight"]
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), _cpu(second), rtol=1e-4, atol=1e-5)
    exe.close()


def test_retained_buffers_outlive_the_callers_references() -> None:
    library = mx.cpu_ref(0).library
    sym = _net()
    shapes = {"data": (1, 3, 4, 4)}
    arg_shapes, _, _ = sym.infer_shape(**shapes)
    rng = np.random.default_rng(3)
    values = {name: rng.standard_normal(shape).astype(np.float32)
              for name, shape in zip(sym.list_arguments(), arg_shapes)}
    weights = {name: value for name, value in values.items() if name != "data"}
    graph = annotate_symbol(sym, {name: value.shape for name, value in values.items()},
                            weights=set(weights), dtypes={name: np.float32 for name in values})
    # One weight in device memory, the others in host memory; the caller
    # drops its references: the model keeps them until unloadModel.
    on_device = DeviceBuffer(library, 0, TensorSpec.of(weights["conv_weight"]))
    on_device.copy_from_host(weights["conv_weight"])
    given = {name: value.copy() for name, value in weights.items()}
    given["conv_weight"] = on_device
    model = LoadedModel(library, graph, given, 0)
    del given, on_device
    gc.collect()
    for _ in range(3):  # memory freed and reused would show here
        scratch = [np.full(value.shape, 1e30, np.float32) for value in weights.values()]
    del scratch
    got = model.infer({"data": values["data"]})
    np.testing.assert_allclose(next(iter(got.values())), _cpu(values), rtol=1e-4, atol=1e-5)
    assert model.retained_bytes == sum(value.nbytes for value in weights.values())
    model.close()


@pytest.mark.slow
def test_retaining_saves_the_weights_in_host_memory(build_cpu_ref_variant) -> None:
    spec = importlib.util.spec_from_file_location(
        "retained_weights", ROOT / "benchmarks" / "retained_weights.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    copying = build_cpu_ref_variant("cpu_ref_copy", CR_NAME='"cpu_ref_copy"',
                                    CR_RETAIN_WEIGHTS=0)
    assert not registry.register(copying).retains_weights
    result = bench.compare("squeezenet1_1", 3, copying)  # medians of 3 runs each
    assert result["retained_bytes"] == result["weights_bytes"] > 4 << 20
    assert result["copying_retained_bytes"] == 0 and result["max_abs_error"] < 1e-4
    # The copying build holds every weight twice; the RSS difference is the
    # copy (within 40%: allocator and page rounding, other threads' arenas).
    assert result["saved_bytes"] > 0.6 * result["weights_bytes"], result
