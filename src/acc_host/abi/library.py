"""Loading one accelerator library and calling its entry points.

:class:`AccLibrary` is the chokepoint between Python and a plugin: it checks
what the library exports, negotiates the ABI version, and turns every failure
status into an exception that carries the plugin's own message.
"""

from __future__ import annotations

import faulthandler
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import (
    AccVersionError,
    ContextError,
    InvalidAccNameError,
    LibraryError,
    LibraryNotFoundError,
    MissingSymbolsError,
    NoDeviceError,
    NotALibraryError,
    PluginContractError,
    PluginError,
    PluginOutOfMemoryError,
    PluginUnsupportedError,
    TensorError,
)
from . import header
from .header import ffi
from .releases import Releaser
from .tensor import CStrings, TensorArray, TensorSpec

__all__ = ["AccLibrary", "REQUIRED_SYMBOLS", "IMPERATIVE_SYMBOLS", "OPTIONAL_SYMBOLS",
           "MAX_DEVICES", "FAULT_HANDLER_ENV_VAR", "validate_acc_name", "marked_call"]

# "0": loading a library in this process does not turn on faulthandler.
FAULT_HANDLER_ENV_VAR = "MXNET_ACC_FAULT_HANDLER"

REQUIRED_SYMBOLS = ("getAccApiVersion", "initialize", "getAccName", "getNumAcc",
                    "supportsImperative", "supportedOps", "loadModel", "unloadModel", "infer",
                    "configure")
IMPERATIVE_SYMBOLS = ("mx_alloc", "mx_free", "mx_releaseAll", "copyToAcc", "copyFromAcc",
                      "accGetExecutor")
OPTIONAL_SYMBOLS = ("accGetLastError", "supportedOpsReasons", "retainsWeights",
                    "supportsSparse")

# The most devices one library may report (getNumAcc()). Hosts carry at
# most a few dozen accelerators (16 per node is the common maximum; 7 MIG
# slices of each of 16 GPUs make 112), so 4096 leaves ample room for
# virtual devices while a plugin that answers INT_MAX is refused at load
# instead of making the host build state for two billion devices
# (docs/robustness.md, row plugin-num-acc-huge).
MAX_DEVICES = 4096
_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*\Z")
# supportedOps(): ints after the ids array, and the pattern they hold.
_IDS_GUARD = 16
_IDS_PATTERN = -0x5A5A5A5B
# supportedOpsReasons(): bytes after the reason slots, and what they hold.
_REASONS_GUARD = 64
_REASONS_PATTERN = bytes([0x3C, 0xC3, 0x5A, 0xA5]) * (_REASONS_GUARD // 4)
_ERROR_CLASSES: dict[int, type[PluginError]] = {
    header.ERR_UNSUPPORTED: PluginUnsupportedError,
    header.ERR_OUT_OF_MEMORY: PluginOutOfMemoryError,
}


def validate_acc_name(name: str, path: str) -> str:
    """Checks that name can become a context type (mx.<name>(i))."""
    if not (isinstance(name, str) and 0 < len(name) < header.NAME_MAX
            and _NAME_PATTERN.match(name)):
        raise InvalidAccNameError(
            f"{path}: accelerator name {name!r} is invalid: it must be 1 to {header.NAME_MAX - 1} "
            "characters from [a-z0-9_], starting with a letter", path)
    return name


def _enable_fault_handler() -> None:
    """Turns on Python's faulthandler (unless it is on already, or
    MXNET_ACC_FAULT_HANDLER=0): a plugin that crashes this process then
    leaves the Python stacks of every thread on stderr, whose innermost
    frame names the plugin call in flight (see marked_call)."""
    if os.environ.get(FAULT_HANDLER_ENV_VAR, "1") == "0" or faulthandler.is_enabled():
        return
    try:
        faulthandler.enable(all_threads=True)
    except (AttributeError, OSError, RuntimeError, ValueError):
        pass  # no usable stderr (a GUI, a closed stream): nothing to report to


def marked_call(library: AccLibrary, function: str, context: str,
                call: Callable[..., Any]) -> Callable[..., Any]:
    """call (an entry point of library's), behind a Python frame whose file
    name says which plugin call runs: if the plugin crashes the process
    inside it, faulthandler's report (Python frames, innermost first)
    starts with that line, and with the advice to isolate the plugin. Made
    once per model or executor, it costs one Python call per plugin call."""
    where = (f"<in-process plugin call: {library.name} {function}({context}) of "
             f"{library.path}; a crash here is the plugin's: mx.load_acc(path, isolate=True) "
             f"runs it in a process of its own, where a crash is a PluginCrashedError>")
    namespace: dict[str, Any] = {"call": call}
    exec(compile("def marked(*args):\n    return call(*args)\n", where, "exec"), namespace)
    marked = namespace["marked"]
    marked.__code__ = marked.__code__.replace(co_name=function)
    return marked  # type: ignore[no-any-return]


class _DeviceLocks:
    """One re-entrant lock per device, made on first use."""

    def __init__(self) -> None:
        self._made: dict[int, threading.RLock] = {}
        self._making = threading.Lock()

    def __getitem__(self, dev_id: int) -> threading.RLock:
        lock = self._made.get(dev_id)
        if lock is None:
            with self._making:
                lock = self._made.setdefault(dev_id, threading.RLock())
        return lock

    def used(self) -> list[int]:
        with self._making:
            return sorted(self._made)


class AccLibrary:
    """A loaded, initialized accelerator library.

    Attributes: ``path`` (resolved), ``name`` (the context type), ``api_version``
    (the plugin's), ``num_devices``, ``supports_imperative``, ``isolated``
    (True for :class:`acc_host.isolate.IsolatedLibrary`).
    """

    isolated = False

    def __init__(self, path: str | os.PathLike[str], acc_name: str | None = None,
                 tracer: Any = None) -> None:
        """tracer: the active :class:`acc_host.trace.Tracer`, which records
        every call from the first one on (the registry hands it over)."""
        self.path = os.path.realpath(os.fspath(path))
        self._raw_lib = self._lib = self._open()
        if tracer is not None:
            self.set_tracer(tracer)
        self._check_symbols(REQUIRED_SYMBOLS)
        self._last_error = self._lib.accGetLastError if self._has("accGetLastError") else None
        self.api_version = int(self._lib.getAccApiVersion())
        self._initialize()
        self.library_name = self._read_name()
        self.name = validate_acc_name(acc_name if acc_name is not None else self.library_name,
                                      self.path)
        self.num_devices = int(self._lib.getNumAcc())
        if self.num_devices < 1:
            raise NoDeviceError(
                f"{self.path}: getNumAcc() returned {self.num_devices}; the library has no "
                "usable device", self.path)
        if self.num_devices > MAX_DEVICES:
            raise LibraryError(
                f"{self.path}: getNumAcc() returned {self.num_devices}, more than the "
                f"{MAX_DEVICES} devices acc_host accepts from one library (acc_host.abi.library."
                "MAX_DEVICES)", self.path)
        self.supports_imperative = self._read_imperative()
        # ABI 1.1 additions, each optional: a plugin without them is used as
        # a 1.0 plugin in that respect.
        self.gives_reasons = self._has("supportedOpsReasons")
        self.retains_weights = self._read_retains_weights()
        # ABI 1.2: sparse tensors and storage annotations, only for a plugin
        # that says it takes them (mxnet_acc.h section 12).
        self.supports_sparse = self._read_supports_sparse()
        if self.supports_imperative:
            self._check_symbols(IMPERATIVE_SYMBOLS, "supportsImperative() returned 1 but ")
        self._configure_lock = threading.Lock()
        # Per-device state is made when a device is first used, so a library
        # that reports many devices costs nothing for those never touched.
        self._device_locks = _DeviceLocks()
        self.releases = Releaser(self.name, self._device_locks)
        if not self.isolated:
            _enable_fault_handler()

    # ---- loading -------------------------------------------------------------

    def _check_file(self) -> None:
        if not os.path.exists(self.path):
            raise LibraryNotFoundError(f"accelerator library not found: {self.path}", self.path)
        if not os.path.isfile(self.path):
            raise NotALibraryError(f"{self.path} is not a file", self.path)

    def _open(self) -> Any:
        self._check_file()
        try:
            return header.dlopen(self.path, ffi.RTLD_NOW | ffi.RTLD_LOCAL)
        except OSError as error:
            # cffi appends a note about ctypes.util.find_library, which never
            # applies to an explicit path; keep only the loader's own words.
            reason = str(error).split("  Additionally, ctypes.util", 1)[0]
            raise NotALibraryError(
                f"{self.path} is not a loadable library: {reason}", self.path) from None

    def _has(self, symbol: str) -> bool:
        try:
            getattr(self._lib, symbol)
        except AttributeError:
            return False
        return True

    def _check_symbols(self, symbols: Sequence[str], reason: str = "") -> None:
        missing = [symbol for symbol in symbols if not self._has(symbol)]
        if missing:
            raise MissingSymbolsError(
                f"{self.path}: {reason}required symbols are missing: {', '.join(missing)}",
                self.path, missing)

    def _initialize(self) -> None:
        host, plugin = header.API_VERSION, self.api_version
        status = self._lib.initialize(host)
        if status == header.ERR_VERSION:
            raise AccVersionError(
                f"{self.path}: the library refused host ABI version {header.version_text(host)} "
                f"({host}); it was built for ABI version {header.version_text(plugin)} "
                f"({plugin}){self._message_suffix()}; {header.skew_advice(plugin)}",
                self.path, host, plugin)
        if status != header.OK:
            self._raise("<library>", "initialize", status)
        if plugin // 100 != header.API_VERSION_MAJOR:
            raise AccVersionError(
                f"{self.path}: the library was built for ABI version {header.version_text(plugin)} "
                f"({plugin}), which host ABI version {header.version_text(host)} ({host}) cannot "
                f"use: the major versions differ; {header.skew_advice(plugin)}",
                self.path, host, plugin)

    def _read_name(self) -> str:
        buffer = ffi.new("char[]", header.NAME_MAX)
        self.check("<library>", "getAccName", self._lib.getAccName(buffer, header.NAME_MAX))
        raw = ffi.buffer(buffer)[:]
        if b"\0" not in raw:
            raise InvalidAccNameError(
                f"{self.path}: getAccName() wrote no NUL terminator within {header.NAME_MAX} bytes",
                self.path)
        name = raw.split(b"\0", 1)[0]
        try:
            return name.decode("ascii")
        except UnicodeDecodeError:
            raise InvalidAccNameError(
                f"{self.path}: getAccName() returned non-ASCII bytes {name!r}", self.path) from None

    def _read_imperative(self) -> bool:
        value = int(self._lib.supportsImperative())
        if value not in (0, 1):
            raise LibraryError(f"{self.path}: supportsImperative() returned {value}, not 0 or 1",
                               self.path)
        return value == 1

    def _read_supports_sparse(self) -> bool:
        if self.api_version < header.SPARSE_API_VERSION or not self._has("supportsSparse"):
            return False
        value = int(self._lib.supportsSparse())
        if value not in (0, 1):
            raise LibraryError(f"{self.path}: supportsSparse() returned {value}, not 0 or 1",
                               self.path)
        return value == 1

    def _read_retains_weights(self) -> bool:
        if not self._has("retainsWeights"):
            return False
        value = int(self._lib.retainsWeights())
        if value not in (0, 1):
            raise LibraryError(f"{self.path}: retainsWeights() returned {value}, not 0 or 1",
                               self.path)
        return value == 1

    # ---- errors ----------------------------------------------------------------

    def last_error(self) -> str:
        """The plugin's message for the calling thread's last failure, or ""."""
        if self._last_error is None:
            return ""
        text = self._last_error()
        return "" if text == ffi.NULL else ffi.string(text).decode("utf-8", "replace")

    def _message_suffix(self) -> str:
        message = self.last_error()
        return f": {message}" if message else ""

    def _raise(self, accelerator: str, function: str, status: int, context: str = "") -> None:
        error_class = _ERROR_CLASSES.get(status, PluginError)
        raise error_class(accelerator, function, status, header.status_name(status),
                          self.last_error(), context)

    def check(self, accelerator: str, function: str, status: int, context: str = "") -> None:
        """Raises the PluginError matching status unless it is MX_ACC_OK."""
        if status != header.OK:
            self._raise(accelerator, function, status, context)

    def call(self, dev_id: int | None, entry: str, *args: Any, context: str = "") -> None:
        """The one way the host calls an entry point that returns a status:
        under device dev_id's lock (None: a call the ABI does not serialize
        per device), entry (a name of ``mxnet_acc.h``) with args, and a
        status other than MX_ACC_OK raised as the matching
        :class:`PluginError` with accGetLastError()'s message, read under
        the lock too. context names the object of the call in the error."""
        function = getattr(self._lib, entry)
        if dev_id is None:
            status = function(*args)
            if status != header.OK:
                self.check(self.name, entry, status, context)
            return
        with self.device_lock(dev_id):
            status = function(*args)
            if status != header.OK:
                self.check(self.name, entry, status, context)

    def unchecked(self, entry: str, *args: Any) -> Any:
        """entry(*args) as the plugin answers it: no device lock, no status
        check, arguments passed as given (NULLs, bad devices, freed
        pointers). For the callers whose point is the raw answer: the
        conformance kit, which calls entry points with hostile arguments and
        judges the statuses itself, a trace replay, and the exit-time
        mx_releaseAll. Everything else goes through :meth:`call`."""
        return getattr(self._lib, entry)(*args)

    def entry(self, name: str) -> Callable[..., Any]:
        """The entry point name itself (or its recording stand-in while a
        trace is active), for the hot paths inside :mod:`acc_host.abi` that
        bind it once and call it per step without a wrapper's frame."""
        return getattr(self._lib, name)  # type: ignore[no-any-return]

    @property
    def alive(self) -> bool:
        """Whether the library can still be called: False only for an
        isolated library whose plugin process died (load_acc loads it anew)."""
        return True

    @property
    def lib(self) -> Any:
        """The cffi library (for the modules that marshal their own calls):
        the plugin's own functions, or their recording stand-ins while a
        trace is active (:mod:`acc_host.trace`)."""
        return self._lib

    @property
    def traced(self) -> bool:
        return self._lib is not self._raw_lib

    def _known_name(self) -> str | None:
        return getattr(self, "name", None)  # None while the constructor runs

    def set_tracer(self, tracer: Any) -> None:
        """Routes later calls through tracer's stand-in for the cffi library
        (``tracer.wrap``); None: back to the plugin. A trace starts with no
        pooled freed buffers (abi.memory): every device pointer its calls
        pass was allocated in it, or before it and never pooled."""
        if tracer is not None and getattr(self, "supports_imperative", False):
            from .memory import release_pooled

            release_pooled(self)
        self._lib = self._raw_lib if tracer is None else tracer.wrap(
            self._raw_lib, self.path, self._known_name(), self.last_error)

    def device_lock(self, dev_id: int) -> threading.RLock:
        """The lock that serializes calls for one device, as the ABI promises."""
        self.check_device(dev_id)
        return self._device_locks[int(dev_id)]

    def used_devices(self) -> list[int]:
        """The devices some call has used (taken the lock of), ascending."""
        return self._device_locks.used()

    def release(self, dev_id: int, function: Callable[[], object], wait: bool) -> None:
        """Runs a release (unloadModel, mx_free, an executor's release) under
        device dev_id's lock; one asked for by the garbage collector (wait
        false) never waits for another thread's call on the device (see
        acc_host.abi.releases)."""
        self.releases.release(dev_id, function, wait)

    def check_device(self, dev_id: int) -> None:
        if not (isinstance(dev_id, (int, np.integer)) and 0 <= dev_id < self.num_devices):
            raise ContextError(
                f"{self.name}: device {dev_id!r} does not exist (devices 0 to "
                f"{self.num_devices - 1})")

    # ---- configure ----------------------------------------------------------------

    def configure(self, dev_id: int, settings: Mapping[str, Any]) -> dict[str, str]:
        """Calls configure() with settings (values converted with str) and
        returns the plugin's answer as a new dict."""
        self.check_device(dev_id)
        if self.supports_imperative:  # pooled freed buffers are not in use (abi.memory)
            from .memory import release_pooled

            release_pooled(self, dev_id)
        keys = CStrings(list(settings.keys()))
        values = CStrings([str(value) for value in settings.values()])
        out_keys = ffi.new("const char *const **")
        out_vals = ffi.new("const char *const **")
        num_out = ffi.new("int *")
        # configure() calls are serialized among themselves, and with every
        # other call for the device (an export must not race an infer).
        with self._configure_lock, self.device_lock(dev_id):
            self.call(dev_id, "configure", keys.pointer, values.pointer, keys.count, dev_id,
                      out_keys, out_vals, num_out, context=", ".join(settings))
            return self._copy_pairs(out_keys[0], out_vals[0], num_out[0])

    def _copy_pairs(self, keys: Any, values: Any, count: int) -> dict[str, str]:
        if count < 0 or (count > 0 and (keys == ffi.NULL or values == ffi.NULL)):
            raise PluginContractError(
                f"{self.name}: configure() returned {count} outputs with NULL arrays")
        answer = {}
        for index in range(count):
            if keys[index] == ffi.NULL or values[index] == ffi.NULL:
                raise PluginContractError(f"{self.name}: configure() output {index} is NULL")
            answer[ffi.string(keys[index]).decode("utf-8", "replace")] = ffi.string(
                values[index]).decode("utf-8", "replace")
        return answer

    # ---- symbolic ---------------------------------------------------------------------

    def supported_ops(self, json_text: str, data: Mapping[str, TensorSpec], num_nodes: int,
                      dev_id: int = 0) -> list[int]:
        """Ids of the operator nodes of an annotated graph the plugin can run
        on dev_id, validated: ascending, unique, within [0, num_nodes)."""
        return self.supported_ops_reasons(json_text, data, num_nodes, dev_id)[0]

    def _check_storage(self, json_text: str, data: Mapping[str, TensorSpec]) -> None:
        """A TensorError before the call when a plugin that does not take
        sparse tensors (mxnet_acc.h section 12) would see one, or a storage
        annotation: it could not know what they mean."""
        if self.supports_sparse:
            return
        sparse = [name for name, spec in data.items() if spec.stype]
        if sparse or '"__in_stypes__"' in json_text or '"__out_stypes__"' in json_text:
            raise TensorError(
                f"{self.name}: does not take sparse tensors (ABI {self.api_version // 100}."
                f"{self.api_version % 100}, supportsSparse() not 1), so it is never given "
                f"sparse inputs {sparse} or storage annotations; densify them first")

    def supported_ops_reasons(self, json_text: str, data: Mapping[str, TensorSpec],
                              num_nodes: int, dev_id: int = 0
                              ) -> tuple[list[int], dict[int, str]]:
        """supported_ops() and the plugin's reason for each node it declined
        and gave one for (supportedOpsReasons, ABI 1.1; an empty dict from a
        plugin without it)."""
        self._check_storage(json_text, data)
        names = CStrings(list(data))
        tensors = TensorArray(list(data.values()))
        # The plugin may write num_nodes ids; a guard after them, filled with
        # a pattern, shows a plugin that wrote past the end (into memory the
        # host owns, not into the heap's bookkeeping).
        ids = ffi.new("int[]", num_nodes + _IDS_GUARD)
        ids[num_nodes:num_nodes + _IDS_GUARD] = [_IDS_PATTERN] * _IDS_GUARD
        count = ffi.new("int *", -1)
        graph = ffi.new("char[]", json_text.encode("utf-8"))
        reasons = None
        if self.gives_reasons:
            # Zeroed slots, then a guard of the same pattern size as ids'.
            size = header.REASON_MAX
            reasons = ffi.new("char[]", num_nodes * size + _REASONS_GUARD)
            ffi.memmove(ffi.cast("char *", reasons) + num_nodes * size, _REASONS_PATTERN,
                        _REASONS_GUARD)
            self.call(dev_id, "supportedOpsReasons", graph, names.pointer, tensors.pointer,
                      names.count, dev_id, ids, num_nodes, count, reasons, size)
        else:
            self.call(dev_id, "supportedOps", graph, names.pointer, tensors.pointer, names.count,
                      dev_id, ids, num_nodes, count)
        if list(ids[num_nodes:num_nodes + _IDS_GUARD]) != [_IDS_PATTERN] * _IDS_GUARD:
            raise PluginContractError(
                f"{self.name}: supportedOps() wrote past the end of ids, whose capacity was "
                f"{num_nodes}: a buffer overrun, caught in the guard the host puts after it")
        found = count[0]
        if not 0 <= found <= num_nodes:
            unset = " (or left *num_ids unset)" if found == -1 else ""
            raise PluginContractError(
                f"{self.name}: supportedOps() reported {found} ids{unset} for a graph of "
                f"{num_nodes} nodes")
        answer = list(ids[0:found])
        if any(not 0 <= node < num_nodes for node in answer) or answer != sorted(set(answer)):
            raise PluginContractError(
                f"{self.name}: supportedOps() returned ids {answer} that are not ascending, "
                f"unique node ids below {num_nodes}")
        if reasons is None:
            return answer, {}
        return answer, self._read_reasons(reasons, num_nodes, set(answer))

    def _read_reasons(self, reasons: Any, num_nodes: int, accepted: set[int]) -> dict[int, str]:
        """The reason slots the plugin filled for the nodes it declined."""
        size = header.REASON_MAX
        raw = ffi.buffer(reasons, num_nodes * size + _REASONS_GUARD)[:]
        if raw[num_nodes * size:] != _REASONS_PATTERN:
            raise PluginContractError(
                f"{self.name}: supportedOpsReasons() wrote past the end of reasons, "
                f"{num_nodes} slots of {size} bytes: a buffer overrun, caught in the guard the "
                "host puts after it")
        found: dict[int, str] = {}
        for node in range(num_nodes):
            slot = raw[node * size:(node + 1) * size]
            if slot[0] == 0 or node in accepted:
                continue
            if b"\0" not in slot:
                raise PluginContractError(
                    f"{self.name}: supportedOpsReasons() left the reason of node {node} without "
                    f"a NUL within its {size} bytes")
            text = slot.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
            if text:
                found[node] = text
        return found

    def unload_model(self, model_id: str, dev_id: int) -> None:
        self.call(dev_id, "unloadModel", ffi.new("char[]", model_id.encode("utf-8")),
                  context=model_id)

    def release_all(self, dev_id: int) -> int:
        """mx_releaseAll(dev_id) at interpreter exit: no lock (other threads
        are gone or daemons the exit does not wait for), and the status
        returned, not raised, since nobody is left to report it to."""
        from .memory import release_pooled  # mx_releaseAll frees the pooled buffers too

        release_pooled(self, dev_id, free=False)
        return int(self.unchecked("mx_releaseAll", dev_id))

    def __repr__(self) -> str:
        return (f"AccLibrary(name={self.name!r}, path={self.path!r}, "
                f"devices={self.num_devices}, imperative={self.supports_imperative})")
