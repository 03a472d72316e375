"""The compiled-model cache (MXNET_ACC_CACHE_DIR, acc_host.runtime.model_cache) with
cpu_ref's export_model/import_model (plugins/cpu_ref/model/model_file.c): a second
process imports what the first compiled; damaged entries, and entries the
plugin refuses, are rebuilt; the key follows the weights; nothing is written
without the variable. Also configure() export/import directly."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from support.cache_helpers import cache_entries, load_test_model, replace_entry_file, run_script
from support.paths import MODELS

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.plugins import trust
from acc_host.runtime import model_cache
from acc_host.runtime.model_cache import ENV_VAR, CacheEntry, ModelCache, supports_cache

# Runs a model on cpu_ref(0) through simple_bind and reports how its
# accelerator subgraphs were loaded. argv: model folder, output .npy file,
# and "perturb" to change one weight value.
_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import acc_host as mx
    from acc_host.abi import loaded_model

    loadmodel_calls = 0
    compile_model = loaded_model.LoadedModel.__init__

    def counting_init(self, *args, **kwargs):  # LoadedModel() is what calls loadModel()
        global loadmodel_calls
        loadmodel_calls += 1
        compile_model(self, *args, **kwargs)

    loaded_model.LoadedModel.__init__ = counting_init
    folder, output, perturb = sys.argv[1], sys.argv[2], sys.argv[3:] == ["perturb"]
    image = np.load(f"{folder}/input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(f"{folder}/model", 0)
    exe = sym.simple_bind(mx.cpu_ref(0), data=image.shape)
    for name, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
    if perturb:
        name = sorted(arg_params)[0]
        exe.arg_dict[name][:] = arg_params[name].asnumpy() + np.float32(1e-3)
    result = exe.forward(is_train=False, data=image)[0].asnumpy()
    np.save(output, result)
    operators = exe.subgraphs
    print(json.dumps({"sources": [op.load_source for op in operators],
                      "load_seconds": sum(op.load_seconds for op in operators),
                      "loadmodel_calls": loadmodel_calls}))
""")


def _run(name: str, output: Path, cache: Path | None, *extra: str) -> dict:
    return run_script(_SCRIPT, [str(MODELS / name), str(output), *extra], output, cache)


def test_second_process_imports_what_the_first_compiled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run("mobilenetv2_1_0", tmp_path / "first.npy", cache)
    assert first["sources"] == ["compiled"] and first["loadmodel_calls"] == 1
    (entry,) = cache_entries(cache).values()
    second = _run("mobilenetv2_1_0", tmp_path / "second.npy", cache)
    assert second["sources"] == ["cache"] and second["loadmodel_calls"] == 0
    np.testing.assert_array_equal(np.load(tmp_path / "first.npy"),
                                  np.load(tmp_path / "second.npy"))
    np.testing.assert_allclose(np.load(tmp_path / "second.npy"),
                               np.load(MODELS / "mobilenetv2_1_0" / "expected_0.npy"),
                               rtol=1e-4, atol=1e-5)
    assert list(cache_entries(cache).values()) == [entry]
    print(f"\nmobilenetv2_1_0 ({entry.stat().st_size} byte model file): load_seconds "
          f"compiled {first['load_seconds']:.4f}, imported {second['load_seconds']:.4f}")


# ---- in one process: squeezenet1_1 ------------------------------------------------------

SQUEEZENET = MODELS / "squeezenet1_1"
PERTURBED = "squeezenet0_conv0_bias"


@pytest.fixture(scope="module")
def squeezenet():
    return load_test_model(SQUEEZENET)


def _forward(squeezenet, perturb: bool = False) -> tuple[str, np.ndarray]:
    """Runs squeezenet on cpu_ref(0); its subgraph's load_source and output."""
    sym, params, image = squeezenet
    exe = sym.simple_bind(mx.cpu_ref(0), data=image.shape)
    for name, value in params.items():
        (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
    if perturb:
        exe.arg_dict[PERTURBED][:] = params[PERTURBED].asnumpy() + np.float32(1e-3)
    output = exe.forward(is_train=False, data=image)[0].asnumpy()
    (operator,) = exe.subgraphs
    exe.close()
    return operator.load_source, output


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_VAR, str(cache))
    return cache


def test_cpu_ref_offers_the_cache() -> None:
    keys = mx.cpu_ref(0).configure(query="keys")["keys"].split(",")
    assert {"export_model", "import_model", "path"} <= set(keys)
    assert supports_cache(mx.get_library("cpu_ref"))


def test_damaged_entry_is_rebuilt(squeezenet, cache_dir: Path) -> None:
    source, expected = _forward(squeezenet)
    assert source == "compiled"
    (model_file,) = cache_entries(cache_dir).values()
    original = model_file.read_bytes()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0x40
    model_file.write_bytes(bytes(damaged))
    with pytest.warns(model_cache.CacheWarning, match="its model file"):
        source, output = _forward(squeezenet)  # the host's content check finds the damage
    assert source == "compiled"
    np.testing.assert_array_equal(output, expected)
    assert cache_entries(cache_dir) == {model_file.stem: model_file}
    assert model_file.read_bytes() == original  # rewritten, valid again
    assert _forward(squeezenet)[0] == "cache"


def test_entry_the_plugin_refuses_is_rebuilt(squeezenet, cache_dir: Path) -> None:
    source, expected = _forward(squeezenet)
    (model_file,) = cache_entries(cache_dir).values()
    original = model_file.read_bytes()
    # The right graph and weights with a wrong checksum, behind metadata
    # that matches it: only the plugin can tell.
    garbage = original[:-1] + bytes([original[-1] ^ 0xFF])
    entry = replace_entry_file(model_file, garbage)
    assert ModelCache(cache_dir).valid(entry)  # the host's checks pass
    with pytest.raises(mx.PluginError, match="not a valid cpu_ref model file") as error:
        mx.cpu_ref(0).configure(import_model=LoadedModel.new_id(), path=model_file)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"

    source, output = _forward(squeezenet)
    assert source == "compiled"
    np.testing.assert_array_equal(output, expected)
    assert model_file.read_bytes() == original
    assert ModelCache(cache_dir).valid(entry)
    assert _forward(squeezenet)[0] == "cache"


def _fnv1a64(data: bytes) -> int:
    """FNV-1a 64 of data: the checksum of cpu_ref's model files before
    format version 2."""
    value = 0xcbf29ce484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value


@pytest.mark.parametrize("version", [1, 2, 3])
def test_entry_of_an_old_file_format_is_refused_and_rebuilt(squeezenet, cache_dir: Path,
                                                           version: int) -> None:
    """A cpu_ref model file of format version 1 (checksum FNV-1a 64), 2
    (unaligned weight records, no packed filters) or 3 (filters packed in k
    blocks of 128 and a short tail; the folded filters of every step with a
    BatchNorm), behind matching metadata, is refused by the plugin by its
    version, with a clear error naming the versions; the host compiles the
    model again and replaces the entry with a version-4 file."""
    source, expected = _forward(squeezenet)
    (model_file,) = cache_entries(cache_dir).values()
    original = model_file.read_bytes()
    assert int.from_bytes(original[8:12], "little") == 4
    body = original[:8] + version.to_bytes(4, "little") + original[12:-8]
    entry = replace_entry_file(model_file, body + _fnv1a64(body).to_bytes(8, "little"))
    assert ModelCache(cache_dir).valid(entry)  # the host's checks pass: the plugin decides
    with pytest.raises(mx.PluginError, match=f"offset 8: format version {version}; this cpu_ref "
                       "reads version 4") as error:
        mx.cpu_ref(0).configure(import_model=LoadedModel.new_id(), path=model_file)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"

    source, output = _forward(squeezenet)
    assert source == "compiled"
    np.testing.assert_array_equal(output, expected)
    assert model_file.read_bytes() == original
    source, output = _forward(squeezenet)
    assert source == "cache"
    assert output.tobytes() == expected.tobytes()  # imported: bit for bit the compiled output


def test_another_weight_value_is_another_entry(squeezenet, cache_dir: Path) -> None:
    source, expected = _forward(squeezenet)
    assert source == "compiled"
    (key,) = cache_entries(cache_dir)
    source, changed = _forward(squeezenet, perturb=True)
    assert source == "compiled"
    assert not np.array_equal(changed, expected)
    entries = cache_entries(cache_dir)
    assert len(entries) == 2 and key in entries
    # Both are used from now on, each with its own weights.
    source, output = _forward(squeezenet, perturb=True)
    assert source == "cache"
    np.testing.assert_array_equal(output, changed)
    source, output = _forward(squeezenet)
    assert source == "cache"
    np.testing.assert_array_equal(output, expected)


def test_swapped_or_resized_file_is_caught_by_the_host(squeezenet, cache_dir: Path) -> None:
    """The host does not read the file, but its metadata pins the file's
    size and last 16 bytes (the plugin's checksum): another entry's file, or
    one whose length changed, is discarded before the plugin sees it."""
    source, expected = _forward(squeezenet)
    (model_file,) = cache_entries(cache_dir).values()
    original = model_file.read_bytes()
    meta = json.loads(model_file.with_suffix(".json").read_text())
    assert meta["model_size"] == len(original) and meta["model_tail"] == original[-16:].hex()
    assert "model_sha256" not in meta
    key_meta = {k: v for k, v in meta.items() if k not in ("model_size", "model_tail")}
    entry = CacheEntry(model_file.stem, model_file, model_file.with_suffix(".json"), key_meta)
    for content in (original[:-16] + bytes(16), original + b"\0"):
        model_file.write_bytes(content)
        assert not ModelCache(cache_dir).valid(entry)
        assert cache_entries(cache_dir) == {}  # discarded
        source, output = _forward(squeezenet)
        assert source == "compiled"
        np.testing.assert_array_equal(output, expected)
        assert model_file.read_bytes() == original


class _CountingHash:
    """Counts the bytes model_cache hashes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        hash_all = model_cache._hash_all

        def counting(pieces):
            self.bytes += sum(len(piece) for piece in pieces)
            return hash_all(pieces)

        monkeypatch.setattr(model_cache, "_hash_all", counting)


def test_weight_digests_are_remembered_per_array_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """An NDArray's digest is reused while its version (its writes) does
    not change, never for a view; any write makes it hash again."""
    counter = _CountingHash(monkeypatch)
    rng = np.random.default_rng(0)
    arrays = {"w": mx.nd.array(rng.standard_normal((300, 1000)).astype(np.float32)),
              "b": mx.nd.array(rng.standard_normal(7).astype(np.float32))}
    sources = {name: array.asnumpy for name, array in arrays.items()}
    plain = model_cache._weights_digest({n: a.asnumpy() for n, a in arrays.items()})
    counted = counter.bytes
    assert counted == 300 * 1000 * 4 + 7 * 4
    first = model_cache._weights_digest(sources, arrays)
    assert first == plain and counter.bytes == 2 * counted
    assert model_cache._weights_digest(sources, arrays) == first
    assert counter.bytes == 2 * counted  # nothing hashed again
    arrays["b"][:] = 0.5  # a write: b is hashed again, w is not
    changed = model_cache._weights_digest(sources, arrays)
    assert changed != first and counter.bytes == 2 * counted + 7 * 4
    arrays["b"][:] = arrays["b"].asnumpy()  # same values written again: still hashed
    assert model_cache._weights_digest(sources, arrays) == changed
    assert counter.bytes == 2 * counted + 2 * 7 * 4
    # Dtype and shape are part of the digest; a view is never remembered.
    view = {"w": arrays["w"][:150], "b": arrays["b"]}
    before = counter.bytes
    model_cache._weights_digest({n: a.asnumpy for n, a in view.items()}, view)
    model_cache._weights_digest({n: a.asnumpy for n, a in view.items()}, view)
    assert counter.bytes == before + 2 * 150 * 1000 * 4
    assert model_cache._weights_digest(
        {"w": arrays["w"].asnumpy().astype(np.float64), "b": arrays["b"].asnumpy()}) != changed


def test_each_weight_is_hashed_once_per_start(squeezenet, cache_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Storing and then importing an entry, as a fresh process does (no
    digest remembered), hashes every weight byte once: the file's weights
    are compared with the host's values, not hashed again; with the
    digests remembered, a lookup hashes nothing."""
    sym, params, _ = squeezenet
    weight_bytes = sum(value.asnumpy().nbytes for name, value in params.items()
                       if not name.startswith("data"))
    counter = _CountingHash(monkeypatch)
    model_cache._memo.clear()
    assert _forward(squeezenet)[0] == "compiled"
    assert counter.bytes == weight_bytes  # the key; the exported file is compared
    model_cache._memo.clear()
    assert _forward(squeezenet)[0] == "cache"
    assert counter.bytes == 2 * weight_bytes  # the key; the entry's file is compared


def test_weight_digest_of_large_weights_uses_chunks_and_threads() -> None:
    """A weight over 1 MiB is hashed per 1 MiB chunk (the digest is the
    SHA-256 of the chunks' SHA-256s), the same in threads as serially."""
    values = np.arange(3 * (1 << 20) // 4 + 5, dtype=np.float32)
    data = memoryview(values).cast("B")
    chunks = [data[at:at + (1 << 20)] for at in range(0, len(data), 1 << 20)]
    tree = hashlib.sha256(b"".join(hashlib.sha256(c).digest() for c in chunks)).hexdigest()
    expected = hashlib.sha256(f"w:{values.dtype.str}:{values.shape}:{tree};".encode()).hexdigest()
    assert model_cache._weights_digest({"w": values}) == expected
    assert model_cache._hash_chunks(chunks) == model_cache._hash_all(chunks)


def test_nothing_is_written_without_the_variable(squeezenet, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    library = mx.get_library("cpu_ref")
    calls: list[dict] = []
    configure = library.configure

    def recording_configure(dev_id, settings):
        calls.append(dict(settings))
        return configure(dev_id, settings)

    monkeypatch.setattr(library, "configure", recording_configure)
    source, _ = _forward(squeezenet)
    assert source == "compiled"
    assert not [call for call in calls if {"export_model", "import_model"} & set(call)]
    assert list(tmp_path.iterdir()) == []


# ---- configure() directly -------------------------------------------------------------


def test_configure_export_then_import(squeezenet, tmp_path: Path) -> None:
    sym, params, image = squeezenet
    library = mx.get_library("cpu_ref")
    graph = annotate_symbol(sym, {"data": image.shape}, weights=list(params))
    weights = {name: value.asnumpy() for name, value in params.items()}
    ctx = mx.cpu_ref(0)
    path = tmp_path / "squeezenet.model"
    with LoadedModel(library, graph, weights) as compiled:
        answer = ctx.configure(export_model=compiled.model_id, path=path)
        assert answer == {"exported": str(path.stat().st_size)}
        model_id = LoadedModel.new_id()
        assert ctx.configure(import_model=model_id, path=path) == {"imported": model_id}
        with LoadedModel.adopt(library, graph, model_id) as imported:
            first = compiled.infer({"data": image})
            second = imported.infer({"data": image})
            assert list(first) == list(second)
            for name in first:
                np.testing.assert_array_equal(first[name], second[name])
        with pytest.raises(mx.PluginError, match="already loaded") as error:
            ctx.configure(import_model=compiled.model_id, path=path)
        assert error.value.code_name == "MX_ACC_ERR_STATE"

    truncated = tmp_path / "truncated.model"
    truncated.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(mx.PluginError, match="offset 20: the header gives a file size") as error:
        ctx.configure(import_model="truncated", path=truncated)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"
    assert error.value.function == "configure"
    assert "truncated.model" in error.value.plugin_message
    with pytest.raises(mx.PluginError, match="is not loaded") as error:
        ctx.configure(export_model="nosuch", path=tmp_path / "nosuch.model")
    assert error.value.code_name == "MX_ACC_ERR_NOT_FOUND"
    with pytest.raises(mx.PluginError, match="No such file or directory") as error:
        ctx.configure(import_model="missing", path=tmp_path / "missing.model")
    assert error.value.code_name == "MX_ACC_ERR_INTERNAL"


# ---- trust, stale temporaries, unusable directories (issue 34) ---------------------------------


def _forward_warning(squeezenet) -> tuple[str, np.ndarray, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source, output = _forward(squeezenet)
    return source, output, [str(w.message) for w in caught
                            if issubclass(w.category, model_cache.CacheWarning)]


def test_an_untrusted_cache_directory_is_not_used(squeezenet, cache_dir: Path) -> None:
    """A world-writable cache directory (anyone could plant an entry built
    from other weights behind matching metadata) is not used: one
    CacheWarning names the problem, models compile, nothing is imported
    from it or written to it; an entry planted there is never imported.
    With MXNET_ACC_STRICT_MODES=0 it is used, and the planted entry is
    still refused: its file holds other weights than its key names."""
    source, expected = _forward(squeezenet)
    (model_file,) = cache_entries(cache_dir).values()
    # Plant another weight value's model behind this entry's metadata: what
    # an attacker with write access to the directory could do.
    _, poisoned = _forward(squeezenet, perturb=True)
    assert not np.array_equal(poisoned, expected)
    other = [path for path in cache_entries(cache_dir).values() if path != model_file]
    (other_file,) = other
    replace_entry_file(model_file, other_file.read_bytes())
    cache_dir.chmod(0o777)
    try:
        source, output, messages = _forward_warning(squeezenet)
        assert source == "compiled"
        np.testing.assert_array_equal(output, expected)  # not the planted model's output
        assert len(messages) == 1 and "it is not trusted" in messages[0], messages
        assert "writable by everyone" in messages[0] or "writable" in messages[0]
        assert _forward_warning(squeezenet)[2] == []  # warned once
        os.environ[trust.STRICT_ENV_VAR] = "0"
        try:
            source, output, messages = _forward_warning(squeezenet)
            assert source == "compiled" and np.array_equal(output, expected)
            assert len(messages) == 1 and "holds other weights" in messages[0], messages
            assert _forward(squeezenet)[0] == "cache"
        finally:
            del os.environ[trust.STRICT_ENV_VAR]
    finally:
        cache_dir.chmod(0o700)


def test_an_entry_with_untrusted_files_is_rebuilt(squeezenet, cache_dir: Path) -> None:
    """An entry whose model file others may write, or whose metadata is a
    symlink, is deleted and rebuilt, never imported."""
    source, expected = _forward(squeezenet)
    (model_file,) = cache_entries(cache_dir).values()
    model_file.chmod(0o666)
    source, output = _forward(squeezenet)
    assert source == "compiled" and np.array_equal(output, expected)
    assert model_file.stat().st_mode & 0o022 == 0
    meta_file = model_file.with_suffix(".json")
    target = cache_dir.parent / "elsewhere.json"
    target.write_text(meta_file.read_text())
    meta_file.unlink()
    meta_file.symlink_to(target)
    assert _forward(squeezenet)[0] == "compiled"
    assert not meta_file.is_symlink()
    assert _forward(squeezenet)[0] == "cache"


def test_stale_temporaries_are_cleaned_when_the_cache_opens(squeezenet, cache_dir: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """What a process killed while exporting leaves (.export-<pid>-*,
    .meta-<pid>-*) is deleted when a process first opens the cache: the
    temporaries of processes that are gone and any older than a day; a
    live process's recent temporaries are kept."""
    cache_dir.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = [cache_dir / f".export-{gone}-abc", cache_dir / f".meta-{gone}-def"]
    old = cache_dir / f".export-{os.getpid()}-old"
    legacy = cache_dir / ".meta-oldstyle"
    live = cache_dir / f".export-{os.getpid()}-live"
    for path in (*dead, old, legacy, live):
        path.write_bytes(b"partial")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    monkeypatch.setattr(model_cache, "_cleaned", set())
    _forward(squeezenet)
    left = sorted(path.name for path in cache_dir.iterdir() if path.name.startswith("."))
    assert left == [live.name]


@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_an_unusable_cache_directory_is_bypassed(squeezenet, tmp_path: Path, kind: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """MXNET_ACC_CACHE_DIR naming a file, or a directory that cannot be
    created: the cache is an optimisation, so one CacheWarning says so and
    every forward runs, compiled."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    monkeypatch.setenv(ENV_VAR, str(blocker if kind == "a file" else blocker / "cache"))
    source, output, messages = _forward_warning(squeezenet)
    assert source == "compiled"
    assert len(messages) == 1, messages
    assert ("not a directory" in messages[0] if kind == "a file"
            else "cannot be created" in messages[0])
    source, again, messages = _forward_warning(squeezenet)
    assert source == "compiled" and messages == []
    np.testing.assert_array_equal(output, again)
