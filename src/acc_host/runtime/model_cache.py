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
  subgraph JSON and every weight's name, dtype, shape and bytes (a
  weight's bytes as their SHA-256 up to 1 MiB, else as the SHA-256 of the
  SHA-256s of its 1 MiB chunks; with more than 1 MiB to hash, a few threads
  share the chunks: hashlib releases the GIL);
* a weight given as an NDArray (what the executor passes) has its digest
  remembered with the array's storage and version, which counts its writes
  (the executor already relies on it to notice changed weights): binding or
  reloading the same, unwritten weights again never hashes them again;
* each entry is ``<key>.model`` (the plugin's file) and ``<key>.json``
  (what the key covered, the file's size and its last 16 bytes), written
  atomically;
* a lookup checks the metadata, the file's size and its last 16 bytes (where
  both bundled plugins keep their checksum of everything before it, so a
  file swapped for another entry's is caught), then binds the entry to its
  own contents: the file's graph section (the envelope of the SDK's
  plugins/common/binfile.h, :mod:`.cache_contents`, memory-mapped) must
  hold the graph and the weights the key names: each weight compared byte
  for byte with the host values hashed for the key (no weight is hashed
  twice), or hashed from the file where its digest was remembered, so that
  an entry planted with another model's file behind
  matching metadata is caught. The plugin then reads the file at import,
  verifies its own checksum and every field, and must refuse a damaged
  file (section 9 makes that the plugin's duty). An entry whose metadata or
  file is missing or does not match, whose contents are not what its key
  names (a CacheWarning says so), or that the plugin refuses to import, is
  deleted and rebuilt: the cache is never trusted blindly. A plugin whose
  exported files do not carry the graph section cannot have its entries
  bound to their contents: nothing is stored for it (a CacheWarning says
  so, once per library);

Trust (docs/security.md): the directory is used only when the trust rules
of plugin directories hold for it (acc_host.plugins.trust: owned by the user or
root, not writable by group or others, every directory above it safe);
else a :class:`CacheWarning` says why, once, and models are compiled
without the cache. An entry whose files are symlinks, owned by someone
else or writable by group or others is deleted and rebuilt. Whoever can
write the cache directory decides what is imported, so those rules are
what decides who can plant an entry; the graph section is what binds an
entry to the weights and graph its key names. What a plugin derives from
them in its own part of the file (mlu_sim's compiled programs and
transformed constants) the host cannot check: only the directory's trust
rules protect that.

The cache is an optimisation: a directory that cannot be created, or is
a file, is reported the same way and bypassed. Temporaries
(``.export-<pid>-*``, ``.meta-<pid>-*``) left by a process killed while
exporting are deleted when the cache is first opened in a process: those
of a process that is gone, and any older than a day.
"""

from __future__ import annotations

import functools
import hashlib
import json
import mmap
import os
import stat
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from ..abi.library import AccLibrary
from ..errors import AccHostError
from ..plugins import trust
from .cache_contents import graph_section
from .cache_costs import CostRecord

__all__ = ["ENV_VAR", "CacheWarning", "ModelCache", "cache_from_environment"]

ENV_VAR = "MXNET_ACC_CACHE_DIR"
# 2: the metadata holds the file's size and last bytes, no SHA-256 of it;
# weights hashed per 1 MiB chunk.
_FORMAT = 2
_CHUNK = 1 << 20
_TAIL = 16
# Below this many bytes to hash, threads cost more than they save.
_PARALLEL_BYTES = 1 << 20
# Temporaries older than this are stale whoever made them.
_STALE_SECONDS = 24 * 3600
_TEMP_PREFIXES = (".export-", ".meta-")


class CacheWarning(UserWarning):
    """The compiled-model cache cannot be used (it is bypassed: models are
    compiled as without MXNET_ACC_CACHE_DIR)."""


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


# ---- weight digests ------------------------------------------------------------------

WeightSource: TypeAlias = np.ndarray | Callable[[], np.ndarray]
"""A weight's values, or a function returning them (called only when its
digest is not remembered: reading device memory costs a copy)."""

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
# Threads besides the caller's that hash weights: one per further core, at most 3.
_HELPERS = min(3, (os.cpu_count() or 1) - 1)


def _hash_pool() -> ThreadPoolExecutor | None:
    global _pool
    if _HELPERS < 1:
        return None
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_HELPERS, thread_name_prefix="acc_host-hash")
        return _pool


def _chunks(values: np.ndarray) -> list[memoryview]:
    """values' bytes in pieces of at most _CHUNK."""
    data = np.ascontiguousarray(values).data.cast("B")
    return [data[at:at + _CHUNK] for at in range(0, max(len(data), 1), _CHUNK)]


def _hash_all(pieces: list[memoryview]) -> list[bytes]:
    return [hashlib.sha256(piece).digest() for piece in pieces]


def _hash_chunks(chunks: list[memoryview]) -> list[bytes]:
    """The SHA-256 of every chunk, in order: in a few threads when there are
    enough bytes (each thread takes a contiguous run of chunks of about the
    same size; the calling thread takes the last)."""
    total = sum(len(chunk) for chunk in chunks)
    pool = _hash_pool() if total >= _PARALLEL_BYTES and len(chunks) > 1 else None
    if pool is None:
        return _hash_all(chunks)
    parts = min(_HELPERS + 1, len(chunks))  # the pool's threads and this one
    runs: list[list[memoryview]] = [[]]
    share, filled = total / parts, 0
    for chunk in chunks:
        if filled >= share * len(runs) and len(runs) < parts:
            runs.append([])
        runs[-1].append(chunk)
        filled += len(chunk)
    futures = [pool.submit(_hash_all, run) for run in runs[:-1]]
    last = _hash_all(runs[-1])
    return [digest for future in futures for digest in future.result()] + last


class _DigestMemo:
    """Weight digests remembered per NDArray storage: its engine var (held
    weakly, so the entry goes with the array) and the var's version when
    the bytes were hashed, with the dtype and shape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._digests: weakref.WeakKeyDictionary[Any, tuple[int, str, tuple, str]] = (
            weakref.WeakKeyDictionary())

    @staticmethod
    def _state(array: Any) -> tuple[Any, int, str, tuple] | None:
        """(var, version, dtype, shape) of an NDArray that is its whole
        storage; None for a view or anything else."""
        if getattr(array, "_view", True) is not None:
            return None
        var = array._storage.var
        return var, var.version, np.dtype(array.dtype).str, tuple(array.shape)

    def get(self, array: Any) -> str | None:
        state = self._state(array)
        if state is None:
            return None
        with self._lock:
            found = self._digests.get(state[0])
        return found[3] if found is not None and found[:3] == state[1:] else None

    def put(self, array: Any, state: tuple[Any, int, str, tuple] | None, digest: str) -> None:
        """Remembers digest for array as it was in state (taken before its
        bytes were read) unless it was written since."""
        if state is None or self._state(array) != state:
            return
        with self._lock:
            self._digests[state[0]] = (*state[1:], digest)

    def clear(self) -> None:
        with self._lock:
            self._digests.clear()


_memo = _DigestMemo()


@dataclass
class _WeightDigests:
    """What _weights_digest found: every weight's digest by name, and the
    host values of the weights it had to read (those it hashed; a weight
    whose digest was remembered is not read)."""

    digests: dict[str, str]
    values: dict[str, np.ndarray]

    def total(self) -> str:
        """The SHA-256 over every weight's name and digest, sorted by name."""
        total = hashlib.sha256()
        for name in sorted(self.digests):
            total.update(f"{name}:{self.digests[name]};".encode())
        return total.hexdigest()


def _digest_weights(weights: Mapping[str, WeightSource],
                    arrays: Mapping[str, Any] | None = None) -> _WeightDigests:
    """Every weight's digest: its dtype, shape and the SHA-256 of its bytes
    (remembered for the NDArrays of arrays)."""
    arrays = arrays or {}
    described: dict[str, str] = {}
    read: dict[str, np.ndarray] = {}
    pending: list[tuple[str, np.ndarray, Any, list[memoryview]]] = []
    for name in weights:
        array = arrays.get(name)
        remembered = _memo.get(array) if array is not None else None
        if remembered is not None:
            described[name] = remembered
            continue
        state = _memo._state(array) if array is not None else None
        source = weights[name]
        values = source() if callable(source) else source
        read[name] = values
        pending.append((name, values, state, _chunks(values)))
    hashed = iter(_hash_chunks([chunk for _, _, _, parts in pending for chunk in parts]))
    for name, values, state, parts in pending:
        if len(parts) == 1:  # up to 1 MiB: the SHA-256 of the bytes
            content = next(hashed).hex()
        else:  # larger: the SHA-256 of its chunks' SHA-256s
            content = hashlib.sha256(b"".join(next(hashed) for _ in parts)).hexdigest()
        digest = _describe(values, content)
        described[name] = digest
        if name in arrays:
            _memo.put(arrays[name], state, digest)
    return _WeightDigests(described, read)


def _describe(values: np.ndarray, content: str) -> str:
    return f"{np.dtype(values.dtype).str}:{tuple(values.shape)}:{content}"


def _weights_digest(weights: Mapping[str, WeightSource],
                    arrays: Mapping[str, Any] | None = None) -> str:
    """SHA-256 over every weight's name, dtype, shape and bytes (through
    per-weight digests, remembered for the NDArrays of arrays)."""
    return _digest_weights(weights, arrays).total()


def _same_bytes(left: np.ndarray, right: np.ndarray) -> bool:
    """Whether two arrays have the same dtype, shape and bytes (compared
    per 1 MiB piece: a NaN equals itself, nothing is hashed)."""
    if np.dtype(left.dtype).str != np.dtype(right.dtype).str or left.shape != right.shape:
        return False
    mine, theirs = _chunks(left), _chunks(right)
    return all(np.array_equal(np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8))
               for a, b in zip(mine, theirs))


def _file_weights_problem(weights: Mapping[str, np.ndarray], meta: Mapping[str, Any],
                          known: _WeightDigests | None) -> str | None:
    """Why the weights read from a model file are not those meta names, or
    None. With the digests the entry's key was made from (known), each
    weight is checked once: against the host's values byte for byte where
    they were read to make the key, else against its remembered digest;
    without them the file's weights are hashed and the total compared."""
    if known is None:
        return None if _weights_digest(weights) == meta.get("weights_sha256") else \
            "holds other weights"
    if known.total() != meta.get("weights_sha256") or set(weights) != set(known.digests):
        return "holds other weights"
    to_hash: dict[str, np.ndarray] = {}
    for name, values in weights.items():
        host = known.values.get(name)
        if host is None:
            to_hash[name] = values
        elif not _same_bytes(host, values):
            return "holds other weights"
    if to_hash and _digest_weights(to_hash).digests != {
            name: known.digests[name] for name in to_hash}:
        return "holds other weights"
    return None


def _tail(path: Path, size: int) -> str:
    with open(path, "rb") as handle:
        handle.seek(max(size - _TAIL, 0))
        return handle.read(_TAIL).hex()


@dataclass(frozen=True)
class CacheEntry:
    key: str
    model_path: Path
    meta_path: Path
    meta: dict[str, Any]
    # The weights' digests and host values the key was made from (None for
    # an entry made elsewhere): the file's weights are then compared with
    # them, not hashed again.
    weights: _WeightDigests | None = field(default=None, compare=False, repr=False)


class ModelCache:
    """Compiled models of one directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def entry(self, library: AccLibrary, graph_json: str, weights: Mapping[str, WeightSource],
              dev_id: int = 0, arrays: Mapping[str, Any] | None = None) -> CacheEntry:
        """The entry of a subgraph: weights maps each weight's name to its
        values (or a function returning them); arrays, when given, maps the
        names to the NDArrays they were read from, whose digests are then
        remembered (see the module's docstring)."""
        digests = _digest_weights(weights, arrays)
        meta = {"format": _FORMAT, **_identity(library),
                "compile_config": _compile_config(library, dev_id),
                "graph_sha256": hashlib.sha256(graph_json.encode()).hexdigest(),
                "weights_sha256": digests.total()}
        key = hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()
        return CacheEntry(key, self.directory / f"{key}.model", self.directory / f"{key}.json",
                          meta, digests)

    def costs(self, library: AccLibrary, graph_json: str, dev_id: int = 0) -> CostRecord:
        """The cost record of a subgraph (:mod:`.cache_costs`): keyed by the
        plugin's identity, its compile settings and the graph, not the
        weights, so that it is found without reading them."""
        meta = {"format": _FORMAT, **_identity(library),
                "compile_config": _compile_config(library, dev_id),
                "graph_sha256": hashlib.sha256(graph_json.encode()).hexdigest()}
        return CostRecord(self.directory,
                          hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest())

    def valid(self, entry: CacheEntry) -> bool:
        """Whether the entry exists, its files can be trusted (regular files
        of the user's or root's, not writable by group or others) and its
        file matches its metadata (its size and last bytes; the plugin
        checks the rest at import); deletes what is left of an invalid
        entry."""
        if trust.strict_modes() and not all(map(_trusted_file, (entry.meta_path,
                                                                 entry.model_path))):
            self.discard(entry)
            return False
        try:
            stored = json.loads(entry.meta_path.read_text())
            size = entry.model_path.stat().st_size
            tail = _tail(entry.model_path, size)
        except (OSError, ValueError):
            self.discard(entry)
            return False
        if stored != {**entry.meta, "model_size": size, "model_tail": tail}:
            self.discard(entry)
            return False
        problem = _content_problem(entry.model_path, entry.meta, entry.weights)
        if problem is not None:
            self.discard(entry)
            warnings.warn(f"{ENV_VAR}={self.directory}: entry {entry.key[:16]}: its model file "
                          f"{problem}, not what its key names (a planted or damaged entry): "
                          "deleted, the model is compiled again", CacheWarning, stacklevel=2)
            return False
        return True

    def store(self, entry: CacheEntry, exported: Path, library_name: str = "") -> None:
        """Moves an exported model file into the cache with its metadata,
        when its contents are what the entry's key names; else deletes it
        (a file without the SDK's graph section: a CacheWarning, once per
        library)."""
        problem = _content_problem(exported, entry.meta, entry.weights)
        if problem is not None:
            exported.unlink(missing_ok=True)
            with _opened_lock:
                first = library_name not in _unbindable
                _unbindable.add(library_name)
            if first:
                warnings.warn(f"{ENV_VAR}={self.directory}: {library_name or 'a plugin'} "
                              f"exported a model file that {problem}, so the cache cannot bind "
                              "its entries to their contents: its models are not cached",
                              CacheWarning, stacklevel=2)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        size = exported.stat().st_size
        meta = {**entry.meta, "model_size": size, "model_tail": _tail(exported, size)}
        os.replace(exported, entry.model_path)
        _write_atomically(entry.meta_path, json.dumps(meta, sort_keys=True, indent=1))

    def scratch_path(self) -> Path:
        """A fresh file name in the cache directory for a plugin to write."""
        self.directory.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".export-{os.getpid()}-", dir=self.directory)
        os.close(handle)
        return Path(name)

    def clean_stale(self) -> list[str]:
        """Deletes the temporaries of processes that are gone (or older than
        a day); returns their names."""
        removed: list[str] = []
        try:
            names = os.listdir(self.directory)
        except OSError:
            return removed
        now = time.time()
        for name in names:
            if not name.startswith(_TEMP_PREFIXES):
                continue
            path = self.directory / name
            try:
                age = now - path.lstat().st_mtime
            except OSError:
                continue
            pid_text = name.split("-", 2)[1] if name.count("-") >= 2 else ""
            owner_alive = pid_text.isdigit() and _process_alive(int(pid_text))
            if age > _STALE_SECONDS or not owner_alive:
                try:
                    path.unlink()
                    removed.append(name)
                except OSError:
                    pass
        return removed

    def discard(self, entry: CacheEntry) -> None:
        for path in (entry.meta_path, entry.model_path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass


def _content_problem(path: Path, meta: Mapping[str, Any],
                     known: _WeightDigests | None = None) -> str | None:
    """Why the model file at path does not hold the graph and weights meta
    names (its "graph_sha256" over the sorted JSON, "weights_sha256" as
    _weights_digest; see _file_weights_problem for known), or None when it
    does. The file is read once, whole (the plugin's import reads it whole
    too; here it is mapped, not copied)."""
    try:
        data = _map(path)
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    try:
        graph_json, weights = graph_section(data)
        graph = json.loads(graph_json)
    except ValueError as error:
        return f"does not hold the SDK's graph section (plugins/common/binfile.h): {error}"
    if hashlib.sha256(json.dumps(graph, sort_keys=True).encode()).hexdigest() != \
            meta.get("graph_sha256"):
        return "holds another graph"
    return _file_weights_problem(weights, meta, known)


def _map(path: Path) -> bytes | memoryview:
    """The file's bytes, memory-mapped read-only (the map is released with
    the last view of it); an empty file as b""."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return b""
        return memoryview(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))


def _write_atomically(path: Path, text: str) -> None:
    handle, name = tempfile.mkstemp(prefix=f".meta-{os.getpid()}-", dir=path.parent)
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    os.replace(name, path)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process (or a number no pid can be)
    return True


def _trusted_file(path: Path) -> bool:
    """Whether path is missing (the entry is then invalid anyway) or a
    regular file of the user's or root's that group and others cannot
    write."""
    try:
        status = path.lstat()
    except OSError:
        return True
    return (stat.S_ISREG(status.st_mode) and status.st_uid in (0, os.geteuid())
            and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


_opened_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()
_unbindable: set[str] = set()  # libraries whose files have no graph section (warned once)
_cleaned: set[str] = set()


def _bypass(directory: str, reason: str) -> None:
    """Warns, once per directory and reason, that the cache is bypassed."""
    with _opened_lock:
        if (directory, reason) in _warned:
            return
        _warned.add((directory, reason))
    warnings.warn(f"{ENV_VAR}={directory}: {reason}; models are compiled without the "
                  "compiled-model cache", CacheWarning, stacklevel=3)


def cache_from_environment() -> ModelCache | None:
    """The cache of MXNET_ACC_CACHE_DIR, or None when it is unset or cannot
    be used (a CacheWarning says why, once)."""
    directory = os.environ.get(ENV_VAR)
    if not directory:
        return None
    path = Path(directory)
    if path.exists() and not path.is_dir():
        _bypass(directory, "it is not a directory")
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        _bypass(directory, f"the directory cannot be created ({error.strerror or error})")
        return None
    if trust.strict_modes():
        _, problems = trust.directory_problems(path)
        if problems:
            _bypass(directory, f"it is not trusted: {'; '.join(problems)} "
                    f"({trust.STRICT_ENV_VAR}=0 uses it anyway)")
            return None
    cache = ModelCache(path)
    with _opened_lock:
        first = directory not in _cleaned
        _cleaned.add(directory)
    if first:
        cache.clean_stale()
    return cache
