"""The compiled-model cache (the proposal's "Special Accelerator Behavior":
users reuse an accelerator's compiled binaries instead of compiling again).

Plugins that can save a compiled model answer two configure() keys (see
section 9 of mxnet_acc.h): ``export_model=<model id>, path=<file>`` writes a
loaded model's compiled form to a file; ``import_model=<model id>,
path=<file>`` loads one under a new id without compiling. The host keeps
those files in the directory named by ``MXNET_ACC_CACHE_DIR``:

* the key is a SHA-256 over the plugin's identity (name, its own version
  string, the ABI version and a hash of the library file), the device's
  compile settings (the optional "compile_config" query), the annotated
  subgraph JSON and every weight's name, dtype, shape and bytes;
* each entry is ``<key>.model`` (the plugin's file) and ``<key>.json``
  (what the key covered, the file's size and SHA-256), written atomically;
* an entry whose metadata or file is missing, unreadable or does not match
  its checksum, or that the plugin refuses to import, is deleted and
  rebuilt: the cache is never trusted blindly.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import AccHostError
from .library import AccLibrary

__all__ = ["ENV_VAR", "ModelCache", "cache_from_environment"]

ENV_VAR = "MXNET_ACC_CACHE_DIR"
_FORMAT = 1


@functools.cache
def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def supports_cache(library: AccLibrary) -> bool:
    """Whether the plugin answers export_model/import_model."""
    return _keys(library) >= {"export_model", "import_model"}


@functools.cache
def _keys(library: AccLibrary) -> frozenset[str]:
    try:
        answer = library.configure(0, {"query": "keys"})
    except AccHostError:
        return frozenset()
    return frozenset(key.strip() for key in answer.get("keys", "").split(","))


@functools.cache
def _identity(library: AccLibrary) -> dict[str, Any]:
    try:
        version = library.configure(0, {"query": "version"}).get("version", "")
    except AccHostError:
        version = ""
    return {"accelerator": library.library_name, "plugin_version": version,
            "api_version": library.api_version, "library_sha256": _file_digest(library.path)}


def _compile_config(library: AccLibrary, dev_id: int) -> str:
    """The device settings that change compiled code (the optional
    "compile_config" query; "" when the plugin does not answer it)."""
    try:
        return library.configure(dev_id, {"query": "compile_config"}).get("compile_config", "")
    except AccHostError:
        return ""


def _weights_digest(weights: Mapping[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(weights):
        values = np.ascontiguousarray(weights[name])
        digest.update(f"{name}:{values.dtype.str}:{values.shape};".encode())
        digest.update(values.data.cast("B"))
    return digest.hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    key: str
    model_path: Path
    meta_path: Path
    meta: dict[str, Any]


class ModelCache:
    """Compiled models of one directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def entry(self, library: AccLibrary, graph_json: str,
              weights: Mapping[str, np.ndarray], dev_id: int = 0) -> CacheEntry:
        meta = {"format": _FORMAT, **_identity(library),
                "compile_config": _compile_config(library, dev_id),
                "graph_sha256": hashlib.sha256(graph_json.encode()).hexdigest(),
                "weights_sha256": _weights_digest(weights)}
        key = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()
        return CacheEntry(key, self.directory / f"{key}.model", self.directory / f"{key}.json",
                          meta)

    def valid(self, entry: CacheEntry) -> bool:
        """Whether the entry exists and its file matches its metadata;
        deletes what is left of an invalid entry."""
        try:
            stored = json.loads(entry.meta_path.read_text())
            data = entry.model_path.read_bytes()
        except (OSError, ValueError):
            self.discard(entry)
            return False
        expected = {**entry.meta, "model_size": len(data),
                    "model_sha256": hashlib.sha256(data).hexdigest()}
        if stored != expected:
            self.discard(entry)
            return False
        return True

    def store(self, entry: CacheEntry, exported: Path) -> None:
        """Moves an exported model file into the cache with its metadata."""
        self.directory.mkdir(parents=True, exist_ok=True)
        data = exported.read_bytes()
        meta = {**entry.meta, "model_size": len(data),
                "model_sha256": hashlib.sha256(data).hexdigest()}
        os.replace(exported, entry.model_path)
        _write_atomically(entry.meta_path, json.dumps(meta, sort_keys=True, indent=1))

    def scratch_path(self) -> Path:
        """A fresh file name in the cache directory for a plugin to write."""
        self.directory.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".export-", dir=self.directory)
        os.close(handle)
        return Path(name)

    def discard(self, entry: CacheEntry) -> None:
        for path in (entry.meta_path, entry.model_path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass


def _write_atomically(path: Path, text: str) -> None:
    handle, name = tempfile.mkstemp(prefix=".meta-", dir=path.parent)
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    os.replace(name, path)


def cache_from_environment() -> ModelCache | None:
    directory = os.environ.get(ENV_VAR)
    return ModelCache(directory) if directory else None
