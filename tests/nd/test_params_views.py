"""``.params`` files read without copies: the dense arrays of a file are
views of the one buffer the file is read into. They must hold the saved
values, stay valid, and be safe to write through the public API: a write
changes that array only, never another array of the file, the file, or a
buffer the caller passed to ``loads``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.ndarray import params_file


def _saved(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    values = {
        "arg:conv_weight": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "arg:odd": rng.standard_normal(3).astype(np.float32),  # leaves the next one at 4 mod 8
        "arg:fc_bias": rng.standard_normal(5),  # float64: misaligned in the file, copied
        "aux:count": np.arange(7, dtype=np.int64),
        "aux:flags": np.array([True, False, True]),
        "arg:half": rng.standard_normal((2, 2)).astype(np.float16),
    }
    path = tmp_path / "net-0000.params"
    params_file.save(path, list(values.values()), list(values))
    return path, values


def test_loaded_values_are_the_saved_ones(tmp_path: Path) -> None:
    path, values = _saved(tmp_path)
    loaded = mx.nd.load(path)
    assert isinstance(loaded, dict) and list(loaded) == list(values)
    for name, expected in values.items():
        got = loaded[name].asnumpy()
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_arrays_are_views_of_one_buffer_where_aligned(tmp_path: Path) -> None:
    path, _ = _saved(tmp_path)
    arrays, _ = params_file.load(path)
    for array in arrays:
        assert array.flags.writeable and array.flags.aligned and array.flags.c_contiguous
    weight = arrays[0]
    assert not weight.flags.owndata  # a view of the file's buffer, not a copy
    assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays)
                   for b in arrays[i + 1:])


def test_writes_stay_in_their_array(tmp_path: Path) -> None:
    path, values = _saved(tmp_path)
    before = path.read_bytes()
    loaded = mx.nd.load(path)
    loaded["arg:conv_weight"][:] = 5.0
    loaded["arg:odd"] += 1
    loaded["arg:fc_bias"][1] = -3.0
    np.testing.assert_array_equal(loaded["arg:conv_weight"].asnumpy(), 5.0)
    np.testing.assert_allclose(loaded["arg:odd"].asnumpy(), values["arg:odd"] + 1)
    for name in ("aux:count", "aux:flags", "arg:half"):
        np.testing.assert_array_equal(loaded[name].asnumpy(), values[name])
    assert path.read_bytes() == before
    again = mx.nd.load(path)
    np.testing.assert_array_equal(again["arg:conv_weight"].asnumpy(), values["arg:conv_weight"])


def test_arrays_outlive_everything_else(tmp_path: Path) -> None:
    path, values = _saved(tmp_path)
    weight = mx.nd.load(path)["arg:conv_weight"]  # the dict and the other arrays are gone
    path.unlink()
    np.testing.assert_array_equal(weight.asnumpy(), values["arg:conv_weight"])


def test_loads_never_aliases_the_callers_buffer(tmp_path: Path) -> None:
    path, values = _saved(tmp_path)
    buffer = bytearray(path.read_bytes())
    arrays, names = params_file.loads(buffer)
    buffer[:] = bytes(len(buffer))
    for array, name in zip(arrays, names):
        np.testing.assert_array_equal(array, values[name])


@pytest.mark.parametrize("accelerator", ["cpu", "cpu_ref"])
def test_checkpoint_weights_written_through_the_api(tmp_path: Path, accelerator: str) -> None:
    """load_checkpoint, bind, forward; then a weight written through
    arg_params changes the next forward as numpy says."""
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((3, 4)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    mx.model.save_checkpoint(str(tmp_path / "fc"), 0, net,
                             {"fc_weight": mx.nd.array(weight), "fc_bias": mx.nd.array(bias)}, {})
    symbol, args, aux = mx.model.load_checkpoint(str(tmp_path / "fc"), 0)
    ctx = mx.cpu() if accelerator == "cpu" else mx.Context(accelerator, 0)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    exe = symbol.bind(ctx, {"data": mx.nd.array(x, ctx), **args}, aux_states=aux)
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), x @ weight.T + bias, rtol=1e-5)
    args["fc_weight"][:] = 0.0
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), np.broadcast_to(bias, (2, 3)),
                               rtol=1e-6)
    _, reloaded, _ = mx.model.load_checkpoint(str(tmp_path / "fc"), 0)
    np.testing.assert_array_equal(reloaded["fc_weight"].asnumpy(), weight)


def _large(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """A file past the size from which files are memory-mapped."""
    rng = np.random.default_rng(2)
    values = {"arg:big": rng.standard_normal((600, 600)).astype(np.float32),
              "arg:odd": rng.standard_normal(3).astype(np.float32),
              "aux:next": rng.standard_normal((300, 300)).astype(np.float32)}
    path = tmp_path / "big-0000.params"
    params_file.save(path, list(values.values()), list(values))
    assert path.stat().st_size >= params_file.MAP_BYTES
    return path, values


def test_a_large_file_is_mapped_and_its_arrays_are_views(tmp_path: Path) -> None:
    path, values = _large(tmp_path)
    arrays, names = params_file.load(path)
    for array, name in zip(arrays, names):
        assert array.flags.writeable and not array.flags.owndata
        np.testing.assert_array_equal(array, values[name])
    assert not np.shares_memory(arrays[0], arrays[2])


def test_writes_to_mapped_arrays_never_reach_the_file_or_another_array(
        tmp_path: Path) -> None:
    path, values = _large(tmp_path)
    before = path.read_bytes()
    loaded = mx.nd.load(path)
    other = mx.nd.load(path)  # a second load maps the file again
    loaded["arg:big"][:] = 7.0
    loaded["aux:next"] += 1
    np.testing.assert_array_equal(loaded["arg:big"].asnumpy(), 7.0)
    np.testing.assert_allclose(loaded["aux:next"].asnumpy(), values["aux:next"] + 1)
    np.testing.assert_array_equal(loaded["arg:odd"].asnumpy(), values["arg:odd"])
    for name, expected in values.items():
        np.testing.assert_array_equal(other[name].asnumpy(), expected)
    assert path.read_bytes() == before


def test_saving_over_the_file_arrays_were_mapped_from(tmp_path: Path) -> None:
    """Saving loaded arrays back to their own file (a checkpoint updated in
    place) writes their values and leaves the loaded arrays intact."""
    path, values = _large(tmp_path)
    path.chmod(0o640)
    loaded = mx.nd.load(path)
    loaded["arg:big"][0, 0] = 3.0
    mx.nd.save(str(path), loaded)
    for name, expected in values.items():
        got = loaded[name].asnumpy()
        if name == "arg:big":
            assert got[0, 0] == 3.0
            got[0, 0] = expected[0, 0]
        np.testing.assert_array_equal(got, expected)
    again = mx.nd.load(path)
    assert again["arg:big"].asnumpy()[0, 0] == 3.0
    np.testing.assert_array_equal(again["aux:next"].asnumpy(), values["aux:next"])
    assert path.stat().st_mode & 0o777 == 0o640
    assert [entry.name for entry in tmp_path.iterdir()] == [path.name]  # no temporary left


def test_saving_through_a_symlink_replaces_its_target(tmp_path: Path) -> None:
    path, values = _large(tmp_path)
    link = tmp_path / "link.params"
    link.symlink_to(path.name)
    loaded = mx.nd.load(link)
    mx.nd.save(str(link), {name: array * 2 for name, array in loaded.items()})
    assert link.is_symlink()
    np.testing.assert_array_equal(mx.nd.load(path)["arg:odd"].asnumpy(), values["arg:odd"] * 2)
    np.testing.assert_array_equal(loaded["arg:odd"].asnumpy(), values["arg:odd"])
