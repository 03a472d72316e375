"""Offline models of mlu_sim (plugins/mlu_sim/model_file.c) through acc_host:
squeezenet1_1 on mx.mlu(0) with the compiled-model cache (MXNET_ACC_CACHE_DIR):
the first process compiles and exports, the second imports without compiling
(the card's "compiles" statistic does not move) and computes bitwise the same
outputs, which match MXNet's; a cache file the plugin refuses is discarded and
rebuilt; configure export_model/import_model directly, across cards, and the
typed error for a garbage file. Also measures load time compiled vs cache
(printed, not asserted)."""

from __future__ import annotations

import statistics
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from support.cache_helpers import cache_entries, load_test_model, replace_entry_file, run_script
from support.paths import MODELS

import acc_host as mx
from acc_host.abi.loaded_model import LoadedModel
from acc_host.runtime.model_cache import ENV_VAR, ModelCache, supports_cache

SQUEEZENET = MODELS / "squeezenet1_1"
RTOL, ATOL = 1e-4, 1e-5

# Runs squeezenet on mlu(0) through simple_bind; prints how its accelerator
# subgraphs were loaded and the change of card 0's "compiles" statistic.
_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import acc_host as mx
    folder, output = sys.argv[1], sys.argv[2]
    image = np.load(f"{folder}/input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(f"{folder}/model", 0)
    compiles = lambda: int(mx.mlu(0).configure(query="stats")["compiles"])
    before = compiles()
    exe = sym.simple_bind(mx.mlu(0), data=image.shape)
    for name, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
    result = exe.forward(is_train=False, data=image)[0].asnumpy()
    np.save(output, result)
    operators = exe.subgraphs
    print(json.dumps({"sources": [op.load_source for op in operators],
                      "load_seconds": sum(op.load_seconds for op in operators),
                      "compiles": compiles() - before}))
""")


def _run(output: Path, cache: Path) -> dict:
    return run_script(_SCRIPT, [str(SQUEEZENET), str(output)], output, cache)


def test_mlu_offers_offline_models() -> None:
    keys = mx.mlu(0).configure(query="keys")["keys"].split(",")
    assert {"export_model", "import_model", "path"} <= set(keys)
    assert supports_cache(mx.get_library("mlu"))


def test_second_process_imports_without_compiling(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run(tmp_path / "first.npy", cache)
    assert set(first["sources"]) == {"compiled"} and len(first["sources"]) >= 1
    assert first["compiles"] == len(first["sources"])  # one FusionOp per subgraph here
    entries = cache_entries(cache)
    assert len(entries) == len(first["sources"])
    assert all(path.read_bytes()[:8] == b"\x89MLU\r\n\x1a\n" for path in entries.values())
    second = _run(tmp_path / "second.npy", cache)
    assert set(second["sources"]) == {"cache"}
    assert second["compiles"] == 0  # the compiler did not run
    np.testing.assert_array_equal(np.load(tmp_path / "first.npy"),
                                  np.load(tmp_path / "second.npy"))
    np.testing.assert_allclose(np.load(tmp_path / "second.npy"),
                               np.load(SQUEEZENET / "expected_0.npy"), rtol=RTOL, atol=ATOL)
    assert cache_entries(cache) == entries


# ---- in one process ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def squeezenet():
    return load_test_model(SQUEEZENET)


def _forward(squeezenet, keep: bool = False):
    """Runs squeezenet on mlu(0): (load sources, total load seconds, output),
    plus the executor when keep."""
    sym, params, image = squeezenet
    exe = sym.simple_bind(mx.mlu(0), data=image.shape)
    for name, value in params.items():
        (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
    output = exe.forward(is_train=False, data=image)[0].asnumpy()
    operators = exe.subgraphs
    result = ([op.load_source for op in operators], sum(op.load_seconds for op in operators),
              output)
    if keep:
        return (*result, exe)
    exe.close()
    return result


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_VAR, str(cache))
    return cache


def _compiles() -> int:
    return int(mx.mlu(0).configure(query="stats")["compiles"])


def test_refused_cache_file_is_discarded_and_rebuilt(squeezenet, cache_dir: Path) -> None:
    sources, _, expected = _forward(squeezenet)
    assert set(sources) == {"compiled"}
    models = cache_entries(cache_dir)
    model_file = max(models.values(), key=lambda path: path.stat().st_size)
    original = model_file.read_bytes()
    # A damaged checksum behind metadata that matches it (the graph section,
    # which the host checks, intact): only the plugin can tell.
    damaged = bytearray(original)
    damaged[-1] ^= 0x10
    entry = replace_entry_file(model_file, bytes(damaged))
    assert ModelCache(cache_dir).valid(entry)  # the host's checks pass
    with pytest.raises(mx.PluginError, match="not a valid mlu_sim offline model") as error:
        mx.mlu(0).configure(import_model=LoadedModel.new_id(), path=model_file)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"
    assert "checksum" in error.value.plugin_message

    compiles = _compiles()
    sources, _, output = _forward(squeezenet)
    assert sorted(sources) == ["cache", "compiled"]  # the refused one was rebuilt
    assert _compiles() == compiles + 1
    np.testing.assert_array_equal(output, expected)
    assert model_file.read_bytes() == original  # rewritten, valid again
    compiles = _compiles()
    sources, _, output = _forward(squeezenet)
    assert set(sources) == {"cache"} and _compiles() == compiles
    np.testing.assert_array_equal(output, expected)


def test_configure_export_then_import_on_another_card(squeezenet, tmp_path: Path) -> None:
    sources, _, expected, exe = _forward(squeezenet, keep=True)
    try:
        operators = exe.subgraphs
        library = mx.get_library("mlu")
        for index, operator in enumerate(operators):
            path = tmp_path / f"subgraph{index}.model"
            answer = mx.mlu(0).configure(export_model=operator.model.model_id, path=path)
            assert answer == {"exported": str(path.stat().st_size)}
            model_id = LoadedModel.new_id()
            compiles = int(mx.mlu(1).configure(query="stats")["compiles"])
            assert mx.mlu(1).configure(import_model=model_id, path=path) == {"imported": model_id}
            assert int(mx.mlu(1).configure(query="stats")["compiles"]) == compiles
            info = mx.mlu(1).configure(model_info=model_id)
            assert info == mx.mlu(0).configure(model_info=operator.model.model_id)
            with LoadedModel.adopt(library, operator.spec.graph, model_id, 1) as imported:
                inputs = {name: np.random.default_rng(index).standard_normal(spec.shape)
                          .astype(spec.dtype)
                          for name, spec in imported.signature.data.items()}
                first = operator.model.infer(inputs)
                second = imported.infer(inputs)
                assert list(first) == list(second)
                for name in first:
                    np.testing.assert_array_equal(first[name], second[name])
    finally:
        exe.close()

    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"\x89MLU\r\n\x1a\n" + bytes(range(256)) * 40)
    with pytest.raises(mx.PluginError, match="not a valid mlu_sim offline model") as error:
        mx.mlu(0).configure(import_model="garbage", path=garbage)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"
    assert error.value.function == "configure" and "garbage.model" in error.value.plugin_message
    truncated = tmp_path / "truncated.model"
    truncated.write_bytes((tmp_path / "subgraph0.model").read_bytes()[:-100])
    with pytest.raises(mx.PluginError, match="offset 20: the header gives a file size") as error:
        mx.mlu(0).configure(import_model="truncated", path=truncated)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"
    with pytest.raises(mx.PluginError, match="is not loaded") as error:
        mx.mlu(0).configure(export_model="nosuch", path=tmp_path / "nosuch.model")
    assert error.value.code_name == "MX_ACC_ERR_NOT_FOUND"


@pytest.mark.slow
def test_load_time_compiled_versus_cache(squeezenet, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Measures (does not assert) the subgraphs' load time: compiled with no
    cache versus imported from the cache; prints the medians and ratio."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    runs = 5
    compiled = [_forward(squeezenet)[1] for _ in range(runs)]
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))
    sources, _, expected = _forward(squeezenet)
    assert set(sources) == {"compiled"}
    cached = []
    for _ in range(runs):
        sources, seconds, output = _forward(squeezenet)
        assert set(sources) == {"cache"}
        np.testing.assert_array_equal(output, expected)
        cached.append(seconds)
    ratio = statistics.median(compiled) / statistics.median(cached)
    print(f"\nsqueezenet1_1 on mlu(0), host load seconds (all subgraphs) over {runs} runs: "
          f"compiled median {statistics.median(compiled):.4f}, cache median "
          f"{statistics.median(cached):.4f}, compiled/cache {ratio:.2f}")
    # The plugin alone: loadModel() (compiles) versus import_model of its file.
    sym, params, image = squeezenet
    sources, _, _, exe = _forward(squeezenet, keep=True)
    try:
        operator = max(exe.subgraphs,
                       key=lambda op: len(op.spec.graph["nodes"]))
        library = mx.get_library("mlu")
        weights = {name: params[name].asnumpy() for name in operator.spec.weights}
        path = tmp_path / "largest.model"
        mx.mlu(0).configure(export_model=operator.model.model_id, path=path)
        load, imported = [], []
        for _ in range(runs):
            start = time.perf_counter()
            LoadedModel(library, operator.spec.graph, weights).close()
            load.append(time.perf_counter() - start)
            model_id = LoadedModel.new_id()
            start = time.perf_counter()
            mx.mlu(0).configure(import_model=model_id, path=path)
            imported.append(time.perf_counter() - start)
            library.unload_model(model_id, 0)
    finally:
        exe.close()
    print(f"largest subgraph ({path.stat().st_size} byte file): loadModel median "
          f"{statistics.median(load):.4f} s, import_model median "
          f"{statistics.median(imported):.4f} s, ratio "
          f"{statistics.median(load) / statistics.median(imported):.2f}")


@pytest.fixture()
def int8_card():
    mx.mlu(0).configure(precision="int8")
    yield mx.mlu(0)
    mx.mlu(0).configure(precision="fp32")


def test_int8_models_round_trip_and_are_keyed_by_precision(squeezenet, cache_dir: Path,
                                                          int8_card) -> None:
    """An int8-mode model (int8 filters and their scales in the constants)
    exports and imports like any other; the cache keys entries by the
    card's compile settings, so an fp32 card never imports it."""
    sources, _, expected, exe = _forward(squeezenet, keep=True)
    try:
        assert set(sources) == {"compiled"}
        operators = exe.subgraphs
        infos = [int8_card.configure(model_info=op.model.model_id) for op in operators]
        assert sum(int(info["int8_kernels"]) for info in infos) > 0
    finally:
        exe.close()
    compiles = _compiles()
    sources, _, output = _forward(squeezenet)
    assert set(sources) == {"cache"} and _compiles() == compiles
    np.testing.assert_array_equal(output, expected)  # int8 results, bit for bit
    int8_card.configure(precision="fp32")
    sources, _, output = _forward(squeezenet)
    assert set(sources) == {"compiled"}  # another key: compiled for fp32
    assert not np.array_equal(output, expected)
    reference = np.load(SQUEEZENET / "expected_0.npy")
    np.testing.assert_allclose(output, reference, rtol=RTOL, atol=ATOL)
    assert len(cache_entries(cache_dir)) == 2 * len(operators)
