"""The process an isolated accelerator library runs in.

``python child.py LIBRARY CONTROL_FD``: started by
:class:`acc_host.isolate.process.PluginProcess`, which talks to it through
the socket CONTROL_FD (see ``wire.py`` for the framing). This file runs as a
script, not as part of the acc_host package: it loads only the cffi
declarations (``abi/header.py``) and the framing, so a child starts in about a
tenth of a second and never runs discovery.

Requests on the control socket: ``("start",)`` dlopens the library and
answers ``("ready", {"pid", "symbols"})`` or ``("error", text)``;
``("channel",)`` with a socket descriptor attached starts a thread serving
calls on it (no answer). When the control socket closes (the host ended, or closed the
library), the process exits at once, whatever the plugin is doing.

A call request is ``(function, segments, gone, args)``: segments to map
first (``(id, size)``, their descriptors attached in order), segments to
unmap, and the arguments encoded as ``arguments.py`` describes. The answer
is ``("ok", value)``, or ``("exc", text)`` when the request itself was
wrong; a failure status is part of the value, with the plugin's message
(accGetLastError on the same thread, at once) beside it.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))
# Run as a script, this directory heads sys.path: nothing here may shadow
# the standard library, and nothing here is imported by name.
sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or ".") != _HERE]

import importlib.util  # noqa: E402
import mmap  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

_CONFIGURE_MAX = 1 << 16  # configure() answers read at most this many pairs
# The requests a channel serves: the ABI functions, an executor's two, "map".
_CALLS = frozenset({
    "getAccApiVersion", "initialize", "getAccName", "getNumAcc", "supportsImperative",
    "mx_alloc", "mx_free", "mx_releaseAll", "copyToAcc", "copyFromAcc", "accGetExecutor",
    "executor_forward", "executor_release", "supportedOps", "supportedOpsReasons", "loadModel",
    "unloadModel", "infer", "configure", "supportsSparse"})


# Bytes per element of each TensorDType value (mxnet_acc.h section 3).
_ITEMSIZE = {0: 4, 1: 8, 2: 2, 3: 1, 4: 4, 5: 1, 6: 8}


def _weight_names(graph_json: bytes) -> set[bytes]:
    """The variables an annotated graph marks "weight"."""
    import json

    try:
        nodes = json.loads(graph_json).get("nodes", [])
        return {str(node["name"]).encode("utf-8") for node in nodes
                if node.get("op") == "null" and
                (node.get("attrs") or {}).get("__kind__") == "weight"}
    except (ValueError, TypeError, KeyError, AttributeError):
        return set()


def _load(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _written(pointer: Any) -> int | None:
    """The address an out pointer holds, None if the plugin left it unset."""
    value = cdata.address(pointer)
    return None if value == _UNSET_ADDRESS else value


wire = _load("_acc_host_isolate_wire", os.path.join(_HERE, "wire.py"))
abi = _load("_acc_host_isolate_abi",
            os.path.join(os.path.dirname(_HERE), "abi", "header.py"))
cdata = _load("_acc_host_isolate_cdata",
              os.path.join(os.path.dirname(_HERE), "abi", "cdata.py"))
NULL = cdata.NULL
# What out pointers hold before a call: an address no allocation returns, so
# that an out pointer the plugin left alone is told from one it wrote.
_UNSET_ADDRESS = 1
_UNSET = cdata.cast("void *", _UNSET_ADDRESS)


class Server:
    """Serves the calls for one dlopened library."""

    def __init__(self, plugin: Any) -> None:
        """plugin: the library, an acc_host.abi.cdata.RawLibrary."""
        self.plugin = plugin
        self.symbols = plugin.names()
        self._segments: dict[int, tuple[mmap.mmap, Any, int]] = {}
        self._segments_lock = threading.Lock()
        self._executors: dict[int, Any] = {}
        self._last_error = plugin.entry("accGetLastError") if "accGetLastError" in self.symbols \
            else None
        # A plugin that retains weights (retainsWeights, ABI 1.1) keeps their
        # pointers past the call, but the host's arrays reach this process in
        # a staging segment reused by the next call: the weights of each
        # loaded model are copied into buffers of this process, kept until
        # its unloadModel (model id -> weight name -> buffer).
        self._retained: dict[bytes, dict[bytes, Any]] = {}
        self._weight_names: dict[bytes, set[bytes]] = {}

    # ---- serving ---------------------------------------------------------------------

    def serve(self, sock: socket.socket) -> None:
        while True:
            try:
                (function, segments, gone, args), fds = wire.recv(sock)
            except wire.Closed:
                return
            try:
                self._map(segments, fds)
                self._unmap(gone)
                if function == "map":
                    reply: tuple[str, Any] = ("ok", None)
                elif function in _CALLS:
                    reply = ("ok", getattr(self, function)(*args))
                else:
                    reply = ("exc", f"unknown request {function!r}")
            except Exception as error:  # noqa: BLE001  (reported to the host)
                reply = ("exc", f"{type(error).__name__}: {error}")
            try:
                wire.send(sock, reply)
            except wire.Closed:
                return

    def _map(self, segments: list[tuple[int, int]], fds: list[int]) -> None:
        for index, fd in enumerate(fds):
            try:
                if index >= len(segments):
                    continue
                segment_id, size = segments[index]
                with self._segments_lock:
                    if segment_id in self._segments:
                        continue
                    mapped = mmap.mmap(fd, size)
                    pointer = cdata.from_buffer(mapped)
                    self._segments[segment_id] = (mapped, pointer,
                                                  cdata.address(pointer))
            finally:
                os.close(fd)

    def _unmap(self, gone: list[int]) -> None:
        for segment_id in gone:
            with self._segments_lock:
                entry = self._segments.pop(segment_id, None)
            if entry is not None:
                cdata.release(entry[1])
                entry[0].close()

    # ---- arguments -------------------------------------------------------------------

    def _status(self, status: int) -> tuple[int, str | None]:
        """A status and the plugin's message after the call (None: no
        accGetLastError, or it returned NULL), read at once on this thread."""
        if self._last_error is None:
            return int(status), None
        message = self._last_error()
        return int(status), None if message == NULL else \
            cdata.string(message).decode("utf-8", "replace")

    @staticmethod
    def _text(value: bytes | None, keep: list[Any]) -> Any:
        if value is None:
            return NULL
        buffer = cdata.new("char[]", value)
        keep.append(buffer)
        return buffer

    def _texts(self, values: list[bytes | None] | None, keep: list[Any]) -> Any:
        if values is None:
            return NULL
        array = cdata.new("const char *[]", [self._text(value, keep) for value in values] or [NULL])
        keep.append(array)
        return array

    def _host_pointer(self, data: Any) -> Any:
        """The child's address of (segment id, offset), or NULL for None."""
        if data is None:
            return NULL
        segment_id, offset = data
        return cdata.cast("void *", self._segments[segment_id][2] + offset)

    def _sparse_struct(self, data: dict[str, Any], keep: list[Any]) -> Any:
        """The SparseTensor or RowSparseTensor of a sparse tensor (ABI 1.2),
        pointing into the mapped segments."""
        pointers = [self._host_pointer(piece[0]) for piece in data["arrays"]]
        if data["sparse"] == 1:
            struct = cdata.new("SparseTensor *")
            struct.data = pointers[0]
            struct.indices = cdata.cast("uint64_t *", pointers[1])
            struct.indptr = cdata.cast("uint64_t *", pointers[2])
            struct.num_nonzero, struct.num_rows = data["counts"]
        else:
            struct = cdata.new("RowSparseTensor *")
            struct.data = pointers[0]
            struct.row_ids = cdata.cast("uint64_t *", pointers[1])
            struct.num_rows_stored = data["counts"][0]
        keep.append(struct)
        return cdata.cast("void *", struct)

    def _tensors(self, encoded: list[list[Any]] | None, keep: list[Any]) -> Any:
        if encoded is None:
            return NULL
        array = cdata.new("MXTensor[]", max(len(encoded), 1))
        keep.append(array)
        for index, (data, shape, shape_len, dtype, sparse, layout, dev_id) in enumerate(encoded):
            tensor = array[index]
            if data is None:
                tensor.data = NULL
            elif isinstance(data, int):
                tensor.data = cdata.cast("void *", data)
            elif isinstance(data, dict):
                tensor.data = self._sparse_struct(data, keep)
            else:
                tensor.data = self._host_pointer(data)
            if shape is None:
                tensor.shape = NULL
            else:
                extents = cdata.new("uint64_t[]", shape or [0])
                keep.append(extents)
                tensor.shape = extents
            tensor.shape_len = shape_len
            tensor.dtype = dtype
            tensor.isSparse = sparse
            tensor.layout = self._text(layout, keep)
            tensor.dev_id = dev_id
        return array

    # ---- the ABI ---------------------------------------------------------------------

    def getAccApiVersion(self) -> int:
        return int(self.plugin.unchecked("getAccApiVersion"))

    def initialize(self, version: int) -> tuple[int, str | None]:
        return self._status(self.plugin.unchecked("initialize", version))

    def getAccName(self, size: int, null: bool) -> tuple[tuple[int, str | None], bytes]:
        buffer = NULL if null else cdata.new("char[]", max(size, 1))
        status = self._status(self.plugin.unchecked("getAccName", buffer, size))
        return status, b"" if null else cdata.read(buffer, max(size, 0))

    def getNumAcc(self) -> int:
        return int(self.plugin.unchecked("getNumAcc"))

    def supportsImperative(self) -> int:
        return int(self.plugin.unchecked("supportsImperative"))

    def supportsSparse(self) -> int:
        return int(self.plugin.unchecked("supportsSparse"))

    def mx_alloc(self, dev_id: int, size: int,
                 null: bool) -> tuple[tuple[int, str | None], int | None]:
        out = NULL if null else cdata.new("void **", _UNSET)
        status = self._status(self.plugin.unchecked("mx_alloc", dev_id, size, out))
        return status, None if null else _written(out[0])

    def mx_free(self, dev_id: int, pointer: int) -> tuple[int, str | None]:
        return self._status(self.plugin.unchecked("mx_free", dev_id, cdata.cast("void *", pointer)))

    def mx_releaseAll(self, dev_id: int) -> tuple[int, str | None]:
        return self._status(self.plugin.unchecked("mx_releaseAll", dev_id))

    def copyToAcc(self, dst: Any, src: Any) -> tuple[int, str | None]:
        keep: list[Any] = []
        return self._status(self.plugin.unchecked("copyToAcc", self._tensors(dst, keep),
                                                  self._tensors(src, keep)))

    def copyFromAcc(self, dst: Any, src: Any) -> tuple[int, str | None]:
        keep: list[Any] = []
        return self._status(self.plugin.unchecked("copyFromAcc", self._tensors(dst, keep),
                                                 self._tensors(src, keep)))

    def accGetExecutor(self, op_name: bytes | None, inputs: Any, outputs: Any, num_in: int,
                       num_out: int, keys: Any, values: Any, num_attrs: int,
                       dev_id: int, null: bool
                       ) -> tuple[tuple[int, str | None], int | None, bool, bool]:
        keep: list[Any] = []
        out = NULL if null else cdata.new("MXAccExecutor **", cdata.cast("MXAccExecutor *", _UNSET))
        status = self._status(self.plugin.unchecked("accGetExecutor",
            self._text(op_name, keep), self._tensors(inputs, keep), self._tensors(outputs, keep),
            num_in, num_out, self._texts(keys, keep), self._texts(values, keep), num_attrs,
            dev_id, out))
        handle = None if null else _written(out[0])
        if not handle:  # unset (None), or NULL (0)
            return status, handle, False, False
        executor = out[0]
        self._executors[handle] = executor
        return status, handle, executor.forward != NULL, executor.release != NULL

    def executor_forward(self, handle: int, inputs: Any, num_in: int, outputs: Any,
                         num_out: int) -> tuple[int, str | None]:
        keep: list[Any] = []
        executor = self._executors[handle]
        return self._status(executor.forward(executor, self._tensors(inputs, keep), num_in,
                                             self._tensors(outputs, keep), num_out))

    def executor_release(self, handle: int) -> None:
        executor = self._executors.pop(handle)
        executor.release(executor)

    def supportedOps(self, json: bytes | None, names: Any, data: Any, num_data: int,
                     dev_id: int, ids: list[int] | None, capacity: int,
                     num_ids: int | None) -> tuple[tuple[int, str | None], list[int] | None,
                                                   int | None]:
        keep: list[Any] = []
        id_array = NULL if ids is None else cdata.new("int[]", ids or [0])
        count = NULL if num_ids is None else cdata.new("int *", num_ids)
        status = self._status(self.plugin.unchecked("supportedOps",
            self._text(json, keep), self._texts(names, keep), self._tensors(data, keep),
            num_data, dev_id, id_array, capacity, count))
        return (status, None if ids is None else list(id_array[0:len(ids)]),
                None if num_ids is None else int(count[0]))

    def supportedOpsReasons(self, json: bytes | None, names: Any, data: Any, num_data: int,
                            dev_id: int, ids: list[int] | None, capacity: int,
                            num_ids: int | None, reasons: bytes | None, reason_size: int
                            ) -> tuple[tuple[int, str | None], list[int] | None, int | None,
                                       bytes | None]:
        """supportedOps() with the reasons buffer (ABI 1.1): reasons holds the
        host buffer's bytes (guard included), and comes back as the plugin
        left them."""
        keep: list[Any] = []
        id_array = NULL if ids is None else cdata.new("int[]", ids or [0])
        count = NULL if num_ids is None else cdata.new("int *", num_ids)
        text = NULL if reasons is None else cdata.new("char[]", max(len(reasons), 1))
        if reasons:
            cdata.memmove(text, reasons, len(reasons))
        status = self._status(self.plugin.unchecked("supportedOpsReasons",
            self._text(json, keep), self._texts(names, keep), self._tensors(data, keep),
            num_data, dev_id, id_array, capacity, count, text, reason_size))
        return (status, None if ids is None else list(id_array[0:len(ids)]),
                None if num_ids is None else int(count[0]),
                None if reasons is None else cdata.read(text, len(reasons)))

    def _retains(self) -> bool:
        return "retainsWeights" in self.symbols and \
            int(self.plugin.unchecked("retainsWeights")) == 1

    def _own_weights(self, model_id: bytes | None, names: Any, tensors: Any,
                     count: int) -> dict[bytes, Any]:
        """Points the host-memory weights among tensors at copies of their
        bytes owned by this process (see _retained); returns the copies."""
        copies: dict[bytes, Any] = {}
        weights = self._weight_names.get(model_id or b"", set())
        for index in range(count if names is not None and tensors != NULL else 0):
            name, tensor = names[index], tensors[index]
            if name not in weights or tensor.data == NULL or tensor.isSparse or \
                    tensor.dev_id != -1:  # MX_ACC_HOST_DEVICE
                continue
            nbytes = _ITEMSIZE.get(int(tensor.dtype), 0)
            for dim in range(min(int(tensor.shape_len), 16)):
                nbytes *= int(tensor.shape[dim])
            copy = cdata.new("char[]", max(nbytes, 1))
            cdata.memmove(copy, tensor.data, nbytes)
            tensor.data = copy
            copies[name] = copy
        return copies

    def loadModel(self, model_id: bytes | None, json: bytes | None, names: Any, data: Any,
                  num_data: int, dev_id: int) -> tuple[int, str | None]:
        keep: list[Any] = []
        tensors = self._tensors(data, keep)
        key = model_id or b""
        if self._retains() and json is not None:
            self._weight_names[key] = _weight_names(json)
            self._retained[key] = self._own_weights(model_id, names, tensors, num_data)
        answer = self._status(self.plugin.unchecked("loadModel",
            self._text(model_id, keep), self._text(json, keep), self._texts(names, keep),
            tensors, num_data, dev_id))
        if answer[0] != 0:
            self._retained.pop(key, None)
            self._weight_names.pop(key, None)
        return answer

    def unloadModel(self, model_id: bytes | None) -> tuple[int, str | None]:
        keep: list[Any] = []
        answer = self._status(self.plugin.unchecked("unloadModel", self._text(model_id, keep)))
        if answer[0] == 0:
            self._retained.pop(model_id or b"", None)
            self._weight_names.pop(model_id or b"", None)
        return answer

    def infer(self, model_id: bytes | None, in_names: Any, out_names: Any, inputs: Any,
              outputs: Any, num_in: int, num_out: int) -> tuple[int, str | None]:
        keep: list[Any] = []
        tensors = self._tensors(inputs, keep)
        retained = self._retained.get(model_id or b"")
        copies = self._own_weights(model_id, in_names, tensors, num_in) \
            if retained is not None else {}
        answer = self._status(self.plugin.unchecked("infer",
            self._text(model_id, keep), self._texts(in_names, keep), self._texts(out_names, keep),
            tensors, self._tensors(outputs, keep), num_in, num_out))
        if retained is not None:
            for name, copy in copies.items():  # the earlier buffer too, after a failure
                if answer[0] != 0 and name in retained:
                    retained[name + b" (replaced %d)" % len(retained)] = retained[name]
                retained[name] = copy
        return answer

    def configure(self, keys: Any, values: Any, count: int, dev_id: int, num_out: int | None,
                  nulls: tuple[bool, bool]) -> tuple[tuple[int, str | None], int | None, Any, Any]:
        keep: list[Any] = []
        out_keys = NULL if nulls[0] else cdata.new("const char *const **")
        out_values = NULL if nulls[1] else cdata.new("const char *const **")
        out_count = NULL if num_out is None else cdata.new("int *", num_out)
        status = self._status(self.plugin.unchecked("configure",
            self._texts(keys, keep), self._texts(values, keep), count, dev_id, out_keys,
            out_values, out_count))
        answered = None if num_out is None else int(out_count[0])
        readable = answered is not None and 0 <= answered <= _CONFIGURE_MAX
        return (status, answered, self._answer(out_keys, answered, readable),
                self._answer(out_values, answered, readable))

    @staticmethod
    def _answer(out: Any, count: int | None, readable: bool) -> list[bytes | None] | None:
        if out == NULL or out[0] == NULL or not readable or count is None:
            return None
        array = out[0]
        return [None if array[index] == NULL else cdata.string(array[index])
                for index in range(count)]


def _serve_control(control: socket.socket, path: str) -> int:
    server: Server | None = None
    while True:
        try:
            message, fds = wire.recv(control)
        except wire.Closed:
            return 0
        if message[0] == "start" and server is None:
            try:
                plugin = cdata.RawLibrary(path)
            except OSError as error:
                wire.send(control, ("error", str(error)))
                return 3
            server = Server(plugin)
            wire.send(control, ("ready", {"pid": os.getpid(), "symbols": server.symbols}))
        elif message[0] == "channel" and server is not None and fds:
            for extra in fds[1:]:
                os.close(extra)
            channel = socket.socket(fileno=fds[0])
            threading.Thread(target=server.serve, args=(channel,), daemon=True,
                             name=f"channel-{fds[0]}").start()
        else:  # nothing else is sent; never answered
            for fd in fds:
                os.close(fd)


def main(argv: list[str]) -> int:
    path, control_fd = argv[1], int(argv[2])
    control = socket.socket(fileno=control_fd)
    try:
        return _serve_control(control, path)
    except wire.Closed:
        return 0


def _exit(code: int) -> None:
    """Exits at once (plugin threads may still run, so no interpreter
    teardown), after flushing what the plugin printed through stdio."""
    import ctypes  # only at exit: the child starts without it

    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)
    os._exit(code)


if __name__ == "__main__":
    _exit(main(sys.argv))
