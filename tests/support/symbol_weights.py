"""Random weights for a symbol, its outputs on the host's CPU path (the
oracle), and the symbol loaded as one cpu_ref model: for the tests that run
whole graphs that way (fusion, image by image)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel


def random_weights(sym: mx.sym.Symbol, shapes: dict, seed: int) -> dict[str, np.ndarray]:
    """Every argument and auxiliary state not in shapes (the data inputs),
    standard normal times 0.3; moving variances positive."""
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    names = sym.list_arguments() + sym.list_auxiliary_states()
    weights = {}
    for name, shape in zip(names, arg_shapes + aux_shapes):
        if name in shapes:
            continue
        value = rng.standard_normal(shape).astype(np.float32) * 0.3
        if name.endswith("moving_var"):
            value = np.abs(value) + 0.5
        weights[name] = value
    return weights


def host_outputs(sym: mx.sym.Symbol, data: np.ndarray, weights: dict) -> list[np.ndarray]:
    """sym's outputs on the CPU path, for input "data" and those weights."""
    exe = sym.simple_bind(mx.cpu(), data=data.shape)
    for key, value in weights.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    return [out.asnumpy() for out in exe.forward(data=data)]


def assert_matches_host(got: dict[str, np.ndarray], sym: mx.sym.Symbol, data: np.ndarray,
                        weights: dict, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """cpu_ref's outputs (infer()'s mapping, in the graph's order) against
    the host's for the same input and weights."""
    for ours, theirs in zip(got.values(), host_outputs(sym, data, weights)):
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


def assert_new_weights_used(model: LoadedModel, sym: mx.sym.Symbol, data: np.ndarray,
                            weights: dict, fresh: dict) -> None:
    """The loaded model matches the host with its weights, with fresh ones
    given at infer (BatchNorm folded and filters packed again), and with
    those again on the next infer (they stay in use)."""
    assert_matches_host(model.infer({"data": data}), sym, data, weights)
    assert_matches_host(model.infer({"data": data}, weights=fresh), sym, data, fresh)
    assert_matches_host(model.infer({"data": data}), sym, data, fresh)


@contextlib.contextmanager
def loaded_on_cpu_ref(sym: mx.sym.Symbol, data: np.ndarray, weights: dict,
                      threads: int) -> Iterator[LoadedModel]:
    """sym as one cpu_ref model for input "data" of data's shape, with
    those weights, cpu_ref set to `threads` threads (1 again afterwards)."""
    graph = annotate_symbol(sym, {"data": data.shape}, weights=list(weights))
    mx.cpu_ref(0).configure(num_threads=threads)
    try:
        with LoadedModel(mx.get_library("cpu_ref"), graph, weights) as model:
            yield model
    finally:
        mx.cpu_ref(0).configure(num_threads=1)


def outputs_on_cpu_ref(sym: mx.sym.Symbol, data: np.ndarray, weights: dict,
                       threads: int) -> list[np.ndarray]:
    """sym's outputs for input "data" as one cpu_ref model
    (loaded_on_cpu_ref), copied into new host arrays."""
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        return [np.array(value) for value in model.infer({"data": data}).values()]
