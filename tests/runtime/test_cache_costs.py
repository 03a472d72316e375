"""The cost records of the compiled-model cache (acc_host.runtime.cache_costs):
a subgraph whose start through the cache cost more than its compile is
compiled without the cache (never keyed, never exported), a record within
the margin or one the cache cannot trust changes nothing, and a record can
never make a stale entry be used."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from support.cache_helpers import cache_entries, load_test_model
from support.paths import MODELS

import acc_host as mx
from acc_host.runtime import model_cache
from acc_host.runtime.cache_costs import MARGIN_SECONDS
from acc_host.runtime.model_cache import ENV_VAR

SQUEEZENET = MODELS / "squeezenet1_1"


@pytest.fixture(scope="module")
def squeezenet():
    return load_test_model(SQUEEZENET)


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_VAR, str(cache))
    return cache


def _forward(squeezenet, weight_delta: float = 0.0) -> tuple[str, np.ndarray]:
    sym, params, image = squeezenet
    exe = sym.simple_bind(mx.cpu_ref(0), data=image.shape)
    for name, value in params.items():
        (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
    if weight_delta:
        weight = next(n for n in sorted(params) if n.endswith("weight"))
        exe.arg_dict[weight][:] = params[weight].asnumpy() + np.float32(weight_delta)
    output = exe.forward(is_train=False, data=image)[0].asnumpy()
    (operator,) = exe.subgraphs
    exe.close()
    return operator.load_source, output


def _record(cache_dir: Path) -> Path:
    (path,) = cache_dir.glob("*.cost")
    return path


def test_starts_record_their_seconds(squeezenet, cache_dir: Path) -> None:
    source, cold = _forward(squeezenet)
    assert source == "compiled"
    assert set(json.loads(_record(cache_dir).read_text())) == {"compile_s"}
    source, warm = _forward(squeezenet)
    assert source == "cache"
    assert set(json.loads(_record(cache_dir).read_text())) == {"compile_s", "cache_s"}
    assert warm.tobytes() == cold.tobytes()


def test_a_cache_slower_than_the_compile_is_bypassed(squeezenet, cache_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _, cold = _forward(squeezenet)
    _forward(squeezenet)
    _record(cache_dir).write_text(json.dumps({"compile_s": 0.1,
                                              "cache_s": 0.1 + 2 * MARGIN_SECONDS}))
    entries = cache_entries(cache_dir)

    def no_key(*args, **kwargs):
        raise AssertionError("the weights were keyed")

    monkeypatch.setattr(model_cache.ModelCache, "entry", no_key)
    source, output = _forward(squeezenet)
    assert source == "compiled"
    assert output.tobytes() == cold.tobytes()
    assert cache_entries(cache_dir) == entries  # nothing exported
    # A changed weight is compiled too: a record never brings a stale entry.
    source, changed = _forward(squeezenet, weight_delta=1e-3)
    assert source == "compiled" and not np.array_equal(changed, cold)


@pytest.mark.parametrize("record", [
    {"compile_s": 0.1, "cache_s": 0.1 + MARGIN_SECONDS / 2},  # within the margin
    {"compile_s": 0.1},                                      # the cache not timed yet
    {"compile_s": "0.1", "cache_s": 9.0},                   # malformed
])
def test_records_that_do_not_bypass_the_cache(squeezenet, cache_dir: Path, record) -> None:
    _forward(squeezenet)
    _record(cache_dir).write_text(json.dumps(record))
    assert _forward(squeezenet)[0] == "cache"


def test_a_record_others_can_write_is_ignored(squeezenet, cache_dir: Path) -> None:
    _forward(squeezenet)
    path = _record(cache_dir)
    path.write_text(json.dumps({"compile_s": 0.1, "cache_s": 5.0}))
    os.chmod(path, 0o666)
    assert _forward(squeezenet)[0] == "cache"


def test_a_changed_plugin_build_never_uses_an_older_entry(squeezenet, cache_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The key and the cost record hold the plugin library's SHA-256: a
    rebuilt plugin compiles (and exports) again, whatever the records say."""
    _, cold = _forward(squeezenet)
    assert _forward(squeezenet)[0] == "cache"
    before = set(cache_entries(cache_dir))
    model_cache._identity.cache_clear()
    monkeypatch.setattr(model_cache, "_file_digest", lambda path: "0" * 64)
    try:
        source, output = _forward(squeezenet)
        assert source == "compiled"
        assert output.tobytes() == cold.tobytes()
        assert len(set(cache_entries(cache_dir)) - before) == 1
        assert len(list(cache_dir.glob("*.cost"))) == 2
    finally:
        model_cache._identity.cache_clear()
