"""Compiled-model cache entries bound to their own contents (issue 34,
item 7; docs/robustness.md, row ``cache-planted-entry``).

Whoever can write a trusted cache directory could plant, behind an entry's
key and matching metadata, a model file built from other weights or from
another graph. The host reads the graph section of the file (the SDK's
envelope, plugins/common/binfile.h) and recomputes the digests of its graph
and weights: a file that holds anything else than what the key names is a
cache miss with a CacheWarning, deleted and compiled again, on cpu_ref and
mlu_sim.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from cache_helpers import cache_entries, replace_entry_file

import acc_host as mx
from acc_host.runtime import cache_contents
from acc_host.runtime.model_cache import ENV_VAR, CacheWarning

SHAPE = (1, 3, 8, 8)


def _net(tanh: bool) -> mx.sym.Symbol:
    """conv, relu (tanh: another graph over the same weights), fc."""
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv")
    out = mx.sym.Activation(conv, act_type="tanh" if tanh else "relu", name="act")
    return mx.sym.FullyConnected(out, num_hidden=5, name="fc")


def _params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"conv_weight": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
            "conv_bias": rng.standard_normal(4).astype(np.float32),
            "fc_weight": rng.standard_normal((5, 256)).astype(np.float32),
            "fc_bias": rng.standard_normal(5).astype(np.float32)}


IMAGE = np.random.default_rng(7).standard_normal(SHAPE).astype(np.float32)


def _forward(ctx: mx.Context, params: dict[str, np.ndarray], tanh: bool = False
             ) -> tuple[list[str], np.ndarray, list[str]]:
    """(each accelerator subgraph's load source, the output, the
    CacheWarnings raised) of one forward on ctx."""
    exe = _net(tanh).simple_bind(ctx, data=SHAPE)
    for name, value in params.items():
        exe.arg_dict[name][:] = value
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        output = exe.forward(is_train=False, data=IMAGE)[0].asnumpy()
    sources = [step.subgraph.load_source for step in exe._steps if step.subgraph]
    exe.close()
    return sources, output, [str(w.message) for w in caught if w.category is CacheWarning]


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_VAR, str(cache))
    return cache


@pytest.mark.parametrize("ctx", [mx.cpu_ref(0), mx.mlu(0)], ids=str)
def test_a_planted_entry_is_refused_and_rebuilt(ctx: mx.Context, cache_dir: Path,
                                                offload_everything: None) -> None:
    """An entry's file replaced by another entry's (other weights, then
    another graph over the same weights), its metadata made to match: the
    forward compiles instead (right output, one CacheWarning saying what
    the file holds), the entry is rewritten and imported from then on."""
    weights, others = _params(0), _params(1)
    expected = _net(False).simple_bind(mx.cpu(), data=SHAPE).forward(
        is_train=False, data=IMAGE, **weights)[0].asnumpy()
    sources, output, messages = _forward(ctx, weights)
    assert sources == ["compiled"] and messages == []
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-5)
    (key,) = cache_entries(cache_dir)
    original = cache_entries(cache_dir)[key].read_bytes()
    _forward(ctx, others)
    _forward(ctx, weights, tanh=True)
    entries = cache_entries(cache_dir)
    other_weights, other_graph = (entries[name].read_bytes() for name in sorted(
        set(entries) - {key}, key=lambda name: b'"tanh"' in entries[name].read_bytes()))
    for planted, holds in ((other_weights, "holds other weights"),
                           (other_graph, "holds another graph")):
        replace_entry_file(entries[key], planted)
        sources, output, messages = _forward(ctx, weights)
        assert sources == ["compiled"], sources
        np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-5)
        assert len(messages) == 1 and f"its model file {holds}" in messages[0], messages
        assert "deleted, the model is compiled again" in messages[0]
        assert entries[key].read_bytes() == original  # rewritten from the real model
        sources, output, messages = _forward(ctx, weights)
        assert sources == ["cache"] and messages == []
        np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-5)


def test_the_graph_section_is_read_with_every_length_checked(cache_dir: Path) -> None:
    """cache_contents.graph_section gives the file's graph JSON and weights,
    and a ValueError naming the offset for a file that is not in the
    envelope: too short, a size field that lies, a length past the end."""
    weights = _params(0)
    _forward(mx.cpu_ref(0), weights)
    (model_file,) = cache_entries(cache_dir).values()
    data = model_file.read_bytes()
    graph_json, values = cache_contents.graph_section(data)
    assert '"conv"' in graph_json and sorted(values) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(values[name], value)
    with pytest.raises(ValueError, match="fewer than the envelope's header"):
        cache_contents.graph_section(data[:20])
    with pytest.raises(ValueError, match="offset 20: the size field says"):
        cache_contents.graph_section(data + b"\0")
    lying = bytearray(data)
    lying[28:36] = (len(data)).to_bytes(8, "little")  # the JSON's length: past the end
    with pytest.raises(ValueError, match=r"offset 36: the graph JSON \(\d+ bytes\) runs past"):
        cache_contents.graph_section(bytes(lying))
