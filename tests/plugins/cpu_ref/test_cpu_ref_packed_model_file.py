"""cpu_ref's model file, format version 4 (plugins/cpu_ref/model/model_file.c):
aligned weight records and the dense steps' folded and packed filters, used
in place at import. An imported model answers bit for bit what the compiled
one does, before and after infer() gives it new weights (its filters are
then folded and packed again from the new values), and exports again; a
version-2 or version-3 file (version 3: filters packed in k blocks of 128
and a short tail, which gemm.c now joins to the last block, and every
BatchNorm step's folded filters besides the packed ones) is refused by its
version."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.runtime.cache_contents import graph_section

SHAPE = (2, 16, 12, 12)


def _network():
    """Convolutions (3x3 and 1x1) with BatchNorm folded into them, a
    residual add, and a FullyConnected layer: every kind of plan record."""
    data = mx.sym.Variable("data")
    a = mx.sym.Convolution(data, num_filter=32, kernel=(3, 3), pad=(1, 1), no_bias=True,
                           name="c1")
    a = mx.sym.Activation(mx.sym.BatchNorm(a, fix_gamma=False, name="bn1"), act_type="relu")
    b = mx.sym.Convolution(a, num_filter=32, kernel=(1, 1), name="c2")
    b = mx.sym.BatchNorm(b, fix_gamma=False, name="bn2")
    out = mx.sym.Activation(a + b, act_type="relu")
    out = mx.sym.FullyConnected(mx.sym.flatten(out), num_hidden=10, name="fc")
    return out


def _weights(symbol, rng: np.random.Generator) -> dict[str, np.ndarray]:
    arg_shapes, _, aux_shapes = symbol.infer_shape(data=SHAPE)
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    weights = {}
    for name, shape in zip(names, arg_shapes + aux_shapes):
        if name == "data":
            continue
        values = rng.standard_normal(shape).astype(np.float32)
        if name.endswith("var"):
            values = np.abs(values) + np.float32(0.5)
        weights[name] = values
    return weights


@pytest.fixture()
def exported(tmp_path: Path):
    rng = np.random.default_rng(7)
    symbol = _network()
    weights = _weights(symbol, rng)
    graph = annotate_symbol(symbol, {"data": SHAPE}, weights=list(weights))
    library = mx.get_library("cpu_ref")
    path = tmp_path / "net.model"
    compiled = LoadedModel(library, graph, weights)
    mx.cpu_ref(0).configure(export_model=compiled.model_id, path=path)
    image = rng.standard_normal(SHAPE).astype(np.float32)
    yield library, graph, weights, compiled, path, image
    compiled.close()


def _import(library, graph, path: Path) -> LoadedModel:
    model_id = LoadedModel.new_id()
    mx.cpu_ref(0).configure(import_model=model_id, path=path)
    return LoadedModel.adopt(library, graph, model_id)


def _same(first: dict, second: dict) -> None:
    assert list(first) == list(second)
    for name in first:
        assert first[name].tobytes() == second[name].tobytes(), name


def test_layout_aligned_records_and_plans(exported) -> None:
    _, _, weights, _, path, _ = exported
    data = path.read_bytes()
    assert int.from_bytes(data[8:12], "little") == 4
    assert int.from_bytes(data[16:20], "little") == 1  # ACC_BIN_FLAG_ALIGNED
    _, stored = graph_section(data)
    assert set(stored) == set(weights)
    view = memoryview(data)
    for name, values in stored.items():
        np.testing.assert_array_equal(values, weights[name])
        offset = values.__array_interface__["data"][0] - \
            np.frombuffer(view, np.uint8).__array_interface__["data"][0]
        assert offset % 64 == 0, name
    # The plans follow the weights: the folded and packed filters.
    assert len(data) > sum(values.nbytes for values in weights.values()) * 3 // 2


def test_import_answers_as_the_compiled_model_bit_for_bit(exported) -> None:
    library, graph, weights, compiled, path, image = exported
    with _import(library, graph, path) as imported:
        _same(compiled.infer({"data": image}), imported.infer({"data": image}))
        # New BatchNorm and filter values: folded and packed again, in memory
        # of the model's own (the file's plans are left behind).
        changed = {"bn1_gamma": weights["bn1_gamma"] * np.float32(1.5),
                   "c2_weight": weights["c2_weight"] + np.float32(0.25)}
        first = compiled.infer({"data": image}, weights=changed)
        second = imported.infer({"data": image}, weights=changed)
        _same(first, second)
        before = compiled.infer({"data": image}, weights={name: weights[name]
                                                           for name in changed})
        assert not np.array_equal(first[next(iter(first))], before[next(iter(before))])
        compiled.infer({"data": image}, weights=changed)
        again = path.with_name("again.model")
        mx.cpu_ref(0).configure(export_model=imported.model_id, path=again)
    with _import(library, graph, again) as reimported:
        _same(compiled.infer({"data": image}), reimported.infer({"data": image}))


@pytest.mark.parametrize("version", [2, 3])
def test_an_old_version_is_refused_by_its_version(exported, tmp_path: Path,
                                                  version: int) -> None:
    library, graph, _, _, path, _ = exported
    data = bytearray(path.read_bytes())
    data[8:12] = version.to_bytes(4, "little")
    old = tmp_path / "old.model"
    old.write_bytes(bytes(data))
    with pytest.raises(mx.PluginError, match=f"offset 8: format version {version}; this "
                       "cpu_ref reads version 4") as error:
        mx.cpu_ref(0).configure(import_model=LoadedModel.new_id(), path=old)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"


def test_a_damaged_plan_is_refused(exported, tmp_path: Path) -> None:
    _, _, _, _, path, _ = exported
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x40  # in the last plan's packed filters
    damaged = tmp_path / "damaged.model"
    damaged.write_bytes(bytes(data))
    with pytest.raises(mx.PluginError, match="checksum"):
        mx.cpu_ref(0).configure(import_model=LoadedModel.new_id(), path=damaged)


_OTHER_ISA = """
import sys
import numpy as np
import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
graph = annotate_symbol(mx.sym.load(sys.argv[1]), {"data": SHAPE}, weights=WEIGHTS)
weights = dict(np.load(sys.argv[2]))
image = weights.pop("__image__")
library = mx.get_library("cpu_ref")
model_id = LoadedModel.new_id()
mx.cpu_ref(0).configure(import_model=model_id, path=sys.argv[3])
with LoadedModel.adopt(library, graph, model_id) as imported, \\
        LoadedModel(library, graph, weights) as compiled:
    first, second = compiled.infer({"data": image}), imported.infer({"data": image})
    assert all(first[name].tobytes() == second[name].tobytes() for name in first)
print("SAME")
"""


def test_a_file_packed_for_other_vector_instructions_is_packed_again(exported,
                                                                     tmp_path: Path) -> None:
    """Imported where cpu_ref packs for another ISA (ACC_CPU_REF_ISA=generic
    in a process of its own), the plans are not used: the filters are
    packed again and the output is that process's compiled model's."""
    _, _, weights, _, path, image = exported
    symbol_file, arrays = tmp_path / "net-symbol.json", tmp_path / "weights.npz"
    _network().save(str(symbol_file))
    np.savez(arrays, __image__=image, **weights)
    code = _OTHER_ISA.replace("SHAPE", repr(SHAPE)).replace("WEIGHTS", repr(sorted(weights)))
    result = subprocess.run([sys.executable, "-c", code, str(symbol_file), str(arrays), str(path)],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "ACC_CPU_REF_ISA": "generic"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "SAME"
