""":class:`RemoteLib`: the cffi library of a plugin that runs in a child
process.

It has the plugin's functions, with the cffi arguments the host passes to
the real ones (``MXTensor`` arrays, ``char[]`` strings, out pointers), so
every module that marshals its own calls (``library.unchecked("infer", ...)``) works
unchanged: each function sends its arguments to the child, waits, and
writes what the plugin returned through the out pointers. An executor from
``accGetExecutor`` is a host-side ``MXAccExecutor`` whose ``forward`` and
``release`` are cffi callbacks into this object, forwarding to the child's
executor (``state`` holds its address there).

Errors: a failure status comes back as it is, with the plugin's message,
which :meth:`accGetLastError` then returns on the thread that made the call.
A dead or hung child raises from the function itself; from an executor's
callbacks (C cannot carry the exception) the error is kept for the thread
and :meth:`take_pending` hands it to ``IsolatedLibrary.check``.
"""

from __future__ import annotations

import threading
from typing import Any

from ..abi import cdata, header
from ..errors import LibraryDeadError, PluginCrashedError
from .arguments import CallMemory, address, readable, text, texts
from .process import PluginProcess

__all__ = ["RemoteLib", "ABI_FUNCTIONS"]

ABI_FUNCTIONS = frozenset({
    "getAccApiVersion", "initialize", "getAccName", "getNumAcc", "supportsImperative",
    "mx_alloc", "mx_free", "mx_releaseAll", "copyToAcc", "copyFromAcc", "accGetExecutor",
    "supportedOps", "supportedOpsReasons", "loadModel", "unloadModel", "infer", "configure",
    "accGetLastError", "supportsSparse"})
_FORWARD = "int(*)(MXAccExecutor *, const MXTensor *, int, const MXTensor *, int)"
_RELEASE = "void(*)(MXAccExecutor *)"
_ERR_INTERNAL = 8  # MX_ACC_ERR_INTERNAL


def _context(value: Any) -> str:
    name = text(value)
    return "" if name is None else name.decode("utf-8", "replace")


class _Executor:
    """A host-side executor: its struct, the child's, and the tensor counts
    it was made for (forward reads no more descriptors than these: a
    pointer from C has no length, and a count larger than the array a
    caller passes, which the plugin would refuse unread, must not make the
    host read past it)."""

    __slots__ = ("struct", "handle", "op_name", "num_in", "num_out")

    def __init__(self, struct: Any, handle: int, op_name: str, num_in: int,
                 num_out: int) -> None:
        self.struct, self.handle, self.op_name = struct, handle, op_name
        self.num_in, self.num_out = num_in, num_out


class RemoteLib:
    """The functions of the plugin in process (only those it exports)."""

    def __init__(self, process: PluginProcess) -> None:
        self._process = process
        self._local = threading.local()  # per thread: last message, pending error
        self._executors: dict[int, _Executor] = {}
        self._executors_lock = threading.Lock()
        self._answer: tuple[Any, ...] = ()  # configure()'s last answer, kept alive
        self._forward = cdata.callback(_FORWARD, self._executor_forward, error=_ERR_INTERNAL)
        self._release = cdata.callback(_RELEASE, self._executor_release)

    def __getattr__(self, name: str) -> Any:
        if name in ABI_FUNCTIONS and name in self._process.symbols:
            method = getattr(self, f"_abi_{name}")
            self.__dict__[name] = method  # later lookups find it directly
            return method
        raise AttributeError(f"{self._process.path}: no function {name!r}")

    @property
    def process(self) -> PluginProcess:
        return self._process

    # ---- errors -------------------------------------------------------------------------

    def _status(self, answer: tuple[int, str | None]) -> int:
        """The status of a call; what accGetLastError() answered in the child
        right after it is what it answers on this thread from now on."""
        status, message = answer
        self._local.message = message
        return int(status)

    def _abi_accGetLastError(self) -> Any:
        message = getattr(self._local, "message", None)
        if message is None:
            return cdata.NULL
        self._local.buffer = cdata.new("char[]", message.encode("utf-8"))
        return self._local.buffer

    def take_pending(self) -> BaseException | None:
        """The error an executor callback of this thread could not raise."""
        error = getattr(self._local, "pending", None)
        self._local.pending = None
        return error

    # ---- identification ----------------------------------------------------------------

    def _abi_getAccApiVersion(self) -> int:
        return int(self._process.call("getAccApiVersion", ()))

    def _abi_initialize(self, version: int) -> int:
        return self._status(self._process.call("initialize", (int(version),)))

    def _abi_getAccName(self, buffer: Any, size: int) -> int:
        null = buffer == cdata.NULL
        status, raw = self._process.call("getAccName", (int(size), null))
        if not null:
            cdata.memmove(buffer, raw, min(len(raw), int(size)))
        return self._status(status)

    def _abi_getNumAcc(self) -> int:
        return int(self._process.call("getNumAcc", ()))

    def _abi_supportsImperative(self) -> int:
        return int(self._process.call("supportsImperative", ()))

    def _abi_supportsSparse(self) -> int:
        return int(self._process.call("supportsSparse", ()))

    # ---- memory -------------------------------------------------------------------------

    def _abi_mx_alloc(self, dev_id: int, size: int, out: Any) -> int:
        null = out == cdata.NULL
        status, pointer = self._process.call("mx_alloc", (int(dev_id), int(size), null),
                                             context=f"{int(size)} bytes")
        if pointer is not None:  # else the plugin left *ptr alone
            out[0] = cdata.cast("void *", pointer)
        return self._status(status)

    def _release_call(self, function: str, args: tuple[Any, ...], context: str = "") -> int:
        """A call that releases memory, a model or an executor: once the
        process is dead (or dies meanwhile), what it would release went
        with it, so the call succeeds (the death is kept for later calls;
        these run from finalizers too, where an exception has no caller)."""
        if not self._process.alive:
            return header.OK
        try:
            answer = self._process.call(function, args, context=context)
        except (PluginCrashedError, LibraryDeadError):
            return header.OK
        return header.OK if answer is None else self._status(answer)  # None: release is void

    def _abi_mx_free(self, dev_id: int, pointer: Any) -> int:
        return self._release_call("mx_free", (int(dev_id), address(pointer)))

    def _abi_mx_releaseAll(self, dev_id: int) -> int:
        return self._release_call("mx_releaseAll", (int(dev_id),))

    def _abi_copyToAcc(self, dst: Any, src: Any) -> int:
        memory = CallMemory()
        args = (memory.tensors(dst, 1), memory.tensors(src, 1))
        return self._status(self._process.call("copyToAcc", args, memory))

    def _abi_copyFromAcc(self, dst: Any, src: Any) -> int:
        memory = CallMemory()
        args = (memory.tensors(dst, 1, write=True, copy_in=False), memory.tensors(src, 1))
        return self._status(self._process.call("copyFromAcc", args, memory))

    # ---- imperative -----------------------------------------------------------------------

    def _abi_accGetExecutor(self, op_name: Any, inputs: Any, outputs: Any,
                            num_in: int, num_out: int, keys: Any, values: Any, num_attrs: int,
                            dev_id: int, out: Any) -> int:
        memory = CallMemory()
        name = _context(op_name)
        args = (text(op_name), memory.tensors(inputs, num_in, data=False),
                memory.tensors(outputs, num_out, data=False), int(num_in), int(num_out),
                texts(keys, num_attrs), texts(values, num_attrs), int(num_attrs), int(dev_id),
                out == cdata.NULL)
        status, handle, has_forward, has_release = self._process.call(
            "accGetExecutor", args, memory, context=name)
        if handle is None:  # out is NULL, or the plugin left it alone
            return self._status(status)
        if not handle:
            out[0] = cdata.NULL
            return self._status(status)
        struct = cdata.new("MXAccExecutor *")
        struct.forward = self._forward if has_forward else cdata.NULL
        struct.release = self._release if has_release else cdata.NULL
        struct.state = cdata.cast("void *", handle)
        with self._executors_lock:
            self._executors[address(struct)] = _Executor(struct, handle, name, int(num_in),
                                                         int(num_out))
        out[0] = struct
        return self._status(status)

    def _executor_forward(self, struct: Any, inputs: Any, num_in: int, outputs: Any,
                          num_out: int) -> int:
        self._local.pending = None
        try:
            executor = self._executors[address(struct)]
            memory = CallMemory()
            args = (executor.handle, memory.tensors(inputs, min(num_in, executor.num_in)),
                    int(num_in),
                    memory.tensors(outputs, min(num_out, executor.num_out), write=True),
                    int(num_out))
            return self._status(self._process.call("executor_forward", args, memory,
                                                   context=executor.op_name))
        except BaseException as error:  # noqa: BLE001  (C cannot carry it: kept for check())
            self._local.pending = error
            return _ERR_INTERNAL

    def _executor_release(self, struct: Any) -> None:
        with self._executors_lock:
            executor = self._executors.pop(address(struct), None)
        if executor is not None:
            self._release_call("executor_release", (executor.handle,), executor.op_name)

    # ---- symbolic ---------------------------------------------------------------------------

    def _abi_supportedOps(self, json: Any, names: Any, data: Any, num_data: int,
                          dev_id: int, ids: Any, capacity: int, num_ids: Any) -> int:
        memory = CallMemory()
        if ids == cdata.NULL:
            initial = None
        else:
            # An int[] the host made: all of it (a guard may follow the
            # capacity); a pointer: the capacity.
            initial = list(ids[0:readable(ids, 1 << 30) if _sized(ids) else max(capacity, 0)])
        count = None if num_ids == cdata.NULL else int(num_ids[0])
        args = (text(json), texts(names, num_data), memory.tensors(data, num_data, data=False),
                int(num_data), int(dev_id), initial, int(capacity), count)
        status, written, found = self._process.call("supportedOps", args, memory)
        if written is not None:
            ids[0:len(written)] = written
        if found is not None:
            num_ids[0] = found
        return self._status(status)

    def _abi_supportedOpsReasons(self, json: Any, names: Any, data: Any, num_data: int,
                                 dev_id: int, ids: Any, capacity: int, num_ids: Any,
                                 reasons: Any, reason_size: int) -> int:
        memory = CallMemory()
        if ids == cdata.NULL:
            initial = None
        else:
            initial = list(ids[0:readable(ids, 1 << 30) if _sized(ids) else max(capacity, 0)])
        if reasons == cdata.NULL:
            slots = None
        else:  # the whole buffer the host made (a guard may follow the slots)
            size = (readable(reasons, 1 << 30) if _sized(reasons)
                    else max(capacity, 0) * max(int(reason_size), 0))
            slots = cdata.read(reasons, size)
        count = None if num_ids == cdata.NULL else int(num_ids[0])
        args = (text(json), texts(names, num_data), memory.tensors(data, num_data, data=False),
                int(num_data), int(dev_id), initial, int(capacity), count, slots,
                int(reason_size))
        status, written, found, left = self._process.call("supportedOpsReasons", args, memory)
        if written is not None:
            ids[0:len(written)] = written
        if found is not None:
            num_ids[0] = found
        if left is not None:
            cdata.memmove(reasons, left, len(left))
        return self._status(status)

    def _abi_loadModel(self, model_id: Any, json: Any, names: Any, data: Any,
                       num_data: int, dev_id: int) -> int:
        memory = CallMemory()
        args = (text(model_id), text(json), texts(names, num_data),
                memory.tensors(data, num_data), int(num_data), int(dev_id))
        return self._status(self._process.call("loadModel", args, memory,
                                               context=_context(model_id)))

    def _abi_unloadModel(self, model_id: Any) -> int:
        return self._release_call("unloadModel", (text(model_id),), _context(model_id))

    def _abi_infer(self, model_id: Any, in_names: Any, out_names: Any, inputs: Any,
                   outputs: Any, num_in: int, num_out: int) -> int:
        memory = CallMemory()
        input_names, output_names = texts(in_names, num_in), texts(out_names, num_out)
        args = (text(model_id), input_names, output_names,
                memory.tensors(inputs, num_in, names=input_names),
                memory.tensors(outputs, num_out, write=True, names=output_names),
                int(num_in), int(num_out))
        return self._status(self._process.call("infer", args, memory,
                                               context=_context(model_id)))

    # ---- configure ------------------------------------------------------------------------

    def _abi_configure(self, keys: Any, values: Any, count: int, dev_id: int, out_keys: Any,
                       out_values: Any, num_out: Any) -> int:
        names = texts(keys, count)
        null_keys, null_values = out_keys == cdata.NULL, out_values == cdata.NULL
        args = (names, texts(values, count), int(count), int(dev_id),
                None if num_out == cdata.NULL else int(num_out[0]), (null_keys, null_values))
        context = ", ".join(name.decode("utf-8", "replace") for name in names or () if name)
        status, answered, answer_keys, answer_values = self._process.call(
            "configure", args, context=context)
        key_array, key_buffers = _strings(answer_keys)
        value_array, value_buffers = _strings(answer_values)
        self._answer = (key_array, key_buffers, value_array, value_buffers)
        if not null_keys:
            out_keys[0] = key_array
        if not null_values:
            out_values[0] = value_array
        if answered is not None:
            num_out[0] = answered
        return self._status(status)


def _sized(array: Any) -> bool:
    try:
        len(array)
    except TypeError:
        return False
    return True


def _strings(values: list[bytes | None] | None) -> tuple[Any, list[Any]]:
    """A ``const char *[]`` holding values (NULL for None), and its buffers."""
    if values is None:
        return cdata.NULL, []
    buffers = [cdata.NULL if value is None else cdata.new("char[]", value) for value in values]
    return cdata.new("const char *[]", buffers or [cdata.NULL]), buffers
