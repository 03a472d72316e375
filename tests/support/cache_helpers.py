"""What the compiled-model cache tests share (tests/runtime/test_model_cache.py for
cpu_ref, tests/plugins/mlu_sim/test_mlu_sim_offline.py for mlu_sim): running a script in a
fresh process with or without the cache, listing the cache's entries,
loading a test model, and planting a model file the host's checks accept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import acc_host as mx
from acc_host.runtime.model_cache import ENV_VAR, CacheEntry


def run_script(script: str, args: list[str], output: Path, cache: Path | None) -> dict:
    """Runs script with args in a new Python process (in output's folder),
    with MXNET_ACC_CACHE_DIR set to cache (unset for None); asserts it
    succeeded and returns the JSON object of its last output line."""
    env = dict(os.environ)
    env.pop(ENV_VAR, None)
    if cache is not None:
        env[ENV_VAR] = str(cache)
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                            text=True, env=env, timeout=600, cwd=output.parent)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def cache_entries(cache: Path) -> dict[str, Path]:
    """The cache's entries: key -> .model file; no scratch file is left."""
    assert not [path.name for path in cache.iterdir() if path.name.startswith(".")]
    models = {path.stem: path for path in cache.glob("*.model")}
    assert {path.stem for path in cache.glob("*.json")} == set(models)
    return models


def load_test_model(folder: Path):
    """(symbol, arg and aux params together, input image) of a tests/models
    folder."""
    image = np.load(folder / "input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    return sym, {**arg_params, **aux_params}, image


def replace_entry_file(model_file: Path, content: bytes) -> CacheEntry:
    """Writes content as the cache entry's model file and updates its
    metadata to match, so that only the plugin can tell it from a valid one;
    returns the entry."""
    model_file.write_bytes(content)
    meta_file = model_file.with_suffix(".json")
    meta = json.loads(meta_file.read_text())
    meta.update(model_size=len(content), model_tail=content[-16:].hex())
    meta_file.write_text(json.dumps(meta, sort_keys=True, indent=1))
    key_meta = {k: v for k, v in meta.items() if k not in ("model_size", "model_tail")}
    return CacheEntry(model_file.stem, model_file, meta_file, key_meta)
