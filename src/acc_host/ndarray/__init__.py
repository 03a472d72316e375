"""NDArray: MXNet's n-dimensional array (``mx.nd``).

An NDArray has a context, a shape and a dtype, and keeps its elements in a
storage: host memory (a numpy array) for the CPU and for accelerators that
work on host memory, or device memory from the plugin's mx_alloc() for
accelerators with their own memory. Every mutation increments the array's
``version``, which is how compiled subgraphs notice changed weights.

Every storage owns an engine var (see :mod:`acc_host.engine`); views share
it. Operators, copies and writes are pushed to the engine with the vars
they read and write, so they may still be running when the call returns:
``asnumpy()``, ``wait_to_read()``, reading elements and ``mx.nd.waitall()``
wait for them. An output's shape is inferred at push time (shape errors are
raised by the call, as in MXNet); an operator whose output shapes cannot be
inferred runs at once, in the calling thread.

``mx.nd.<Op>(...)`` runs any registered operator. On an accelerator context
it runs on the accelerator where the plugin supports it (see
:mod:`acc_host.ndarray.dispatch`); otherwise the inputs are read to the host, the
registry computes the outputs, and they are written back to the context
(the CPU path).
"""

from __future__ import annotations

import builtins
import contextlib
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import engine as _engine
from .. import limits
from ..abi.memory import DeviceBuffer, release_pooled
from ..abi.tensor import TensorSpec, dtype_code
from ..context import Context, cpu, current_context
from ..engine.base import check_live, in_operation
from ..engine.naive import NaiveEngine
from ..errors import (
    AccHostError,
    ContextError,
    EngineError,
    InvalidArgumentError,
    OperatorError,
    TensorError,
)
from ..ops import registry
from . import dispatch, params_file
from .methods import NDArrayMethods, positional_attributes

__all__ = ["NDArray", "array", "empty", "zeros", "ones", "full", "arange", "from_dlpack",
           "save", "load", "waitall", "concatenate"]

_DEFAULT_DTYPE = np.dtype(np.float32)


class _Storage:
    """Where an array's elements live. ``host`` is a numpy array when they
    live in host memory; ``device`` a DeviceBuffer otherwise; neither while
    the operation producing them is pending (``spec`` then holds the
    inferred shape and dtype). ``var`` is the engine var of the elements.
    ``deferred``: the elements belong in device memory but are zeros held
    in host memory (calloc's zero pages, nothing written) until the first
    write of the whole array copies that into a device buffer
    (:meth:`NDArray._deferred_zeros`: simple_bind's arrays, whose zeros
    copy_params_from or a forward's inputs overwrite). Until then the array
    is a valid host-held array on its context, as arrays of dtypes the ABI
    cannot describe always are.
    ``guard``: for an argument or output of an executor, the executor's
    lock, which every write from outside the executor holds while it is
    pushed, and every read from outside the engine while it copies (a
    forward holds it while it pushes its steps, and under NaiveEngine while
    they run: it sees one whole version of its arguments, and a read sees
    one whole forward's outputs)."""

    __slots__ = ("host", "device", "var", "spec", "guard", "deferred")

    def __init__(self, host: np.ndarray | None, device: Any = None) -> None:
        self.host = host
        self.device = device
        self.var = _engine.Var()
        self.spec: tuple[tuple[int, ...], np.dtype] | None = None
        self.guard: Any = None
        self.deferred = False

    @property
    def filled(self) -> bool:
        return self.host is not None or self.device is not None


def _device_buffer(ctx: Context, spec: TensorSpec) -> DeviceBuffer:
    return DeviceBuffer(ctx.library, ctx.device_id, spec)


def _uses_device_memory(ctx: Context, dtype: Any = None) -> bool:
    """Whether arrays of dtype on ctx live in the plugin's memory: when it
    manages memory and the ABI can describe the dtype (other dtypes, such as
    bool, stay in host memory on any context)."""
    if ctx.library is None or not ctx.library.supports_imperative:
        return False
    try:
        dtype_code(dtype if dtype is not None else np.float32)
    except TensorError:
        return False
    return True


class NDArray(NDArrayMethods):
    """An array on a context. Views made by basic indexing share storage
    (and version) with the array they come from."""

    __slots__ = ("_storage", "_view", "_ctx", "__weakref__")
    __array_priority__ = 1000.0  # numpy defers binary operators to NDArray

    def __init__(self, source: np.ndarray, ctx: Context | None = None) -> None:
        """Wraps source (taken over, not copied) on ctx."""
        self._ctx = ctx or cpu()
        if _uses_device_memory(self._ctx, source.dtype):
            buffer = _device_buffer(self._ctx, TensorSpec.of(source))
            buffer.copy_from_host(source)
            self._storage = _Storage(None, buffer)
        else:
            self._storage = _Storage(source)
        self._view: tuple | None = None

    @classmethod
    def _from_view(cls, parent: NDArray, key: Any, data: np.ndarray | TensorSpec) -> NDArray:
        result = cls.__new__(cls)
        result._ctx = parent._ctx
        result._storage = parent._storage
        result._view = (key, data)
        return result

    @classmethod
    def _adopt(cls, buffer: Any, ctx: Context) -> NDArray:
        """An array on ctx that takes over buffer (a DeviceBuffer of ctx's
        library and device), without copying."""
        if buffer.library is not ctx.library or buffer.dev_id != ctx.device_id:
            raise ContextError(f"{buffer!r} does not belong to {ctx}")
        result = cls.__new__(cls)
        result._ctx = ctx
        result._storage = _Storage(None, buffer)
        result._view = None
        return result

    @classmethod
    def _deferred_zeros(cls, ctx: Context, shape: tuple[int, ...], dtype: Any) -> NDArray:
        """Zeros on ctx whose device buffer is made by the first write of
        the whole array (see _Storage.deferred); plain zeros on a context
        without device memory."""
        limits.check_array(shape, dtype, "an array")
        values = np.zeros(shape, dtype)
        if not _uses_device_memory(ctx, values.dtype):
            return cls(values, ctx)
        result = cls.__new__(cls)
        result._ctx = ctx
        result._storage = _Storage(values)
        result._storage.deferred = True
        result._view = None
        return result

    def _settle(self, values: np.ndarray) -> bool:
        """Inside a write of the whole array: when its elements are deferred
        zeros (see _Storage.deferred), puts values (of the array's shape) in
        a new device buffer instead of writing them over the zeros; False
        for any other array, left as it is."""
        storage = self._storage
        host = storage.host
        if not storage.deferred or self._view is not None or host is None:
            return False
        values = np.asarray(values)
        if values.shape != host.shape:
            return False
        buffer = _device_buffer(self._ctx, TensorSpec(host.shape, host.dtype))
        buffer.copy_from_host(values.astype(host.dtype, copy=False))
        storage.device = buffer
        storage.host = None
        storage.deferred = False
        return True

    @classmethod
    def _pending(cls, ctx: Context, shape: tuple[int, ...], dtype: Any) -> NDArray:
        """An array whose elements a pushed operation will provide (with
        :meth:`_take`)."""
        result = cls.__new__(cls)
        result._ctx = ctx
        result._storage = _Storage(None)
        result._storage.spec = (tuple(shape), np.dtype(dtype))
        result._view = None
        return result

    def _take(self, result: Any) -> None:
        """Inside the producing operation: the elements become result (an
        NDArray on this context, whose storage is taken over, or a host
        array)."""
        source = result if isinstance(result, NDArray) else NDArray(np.asarray(result), self._ctx)
        if source._view is not None:
            source = NDArray(np.array(source._read()), self._ctx)
        self._storage.host = source._storage.host
        self._storage.device = source._storage.device

    @property
    def _device_view(self) -> bool:
        """Whether this is a view of rows of an array in device memory
        (``_view`` is (slice, TensorSpec of the rows)): its elements are read
        from the array's buffer when needed (see _device_rows)."""
        view = self._view
        return view is not None and type(view[1]) is TensorSpec

    @property
    def _var(self) -> Any:
        """The engine var of the elements (shared with views)."""
        return self._storage.var

    def _sync(self) -> None:
        """Waits for the pending writes of the array (not inside a pushed
        operation, whose dependencies are already satisfied)."""
        if not in_operation():
            _engine.get().wait_to_read(self._storage.var)

    def _spec_hint(self) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype without waiting: the actual ones once the
        elements exist, the inferred ones before."""
        storage = self._storage
        if self._view is None and not storage.filled and storage.spec is not None:
            return storage.spec
        return self.shape, self.dtype

    def _push_write(self, fn: Callable[[], None], reads: Sequence[NDArray] = ()) -> None:
        """Pushes fn, which writes this array and reads ``reads`` (holding
        the storage's guard, if it has one, while it is pushed)."""
        guard = self._storage.guard
        with guard if guard is not None else contextlib.nullcontext():
            _engine.get().push_sync(lambda _run_ctx: fn(), self._ctx,
                                    [array._storage.var for array in reads],
                                    [self._storage.var])

    @property
    def _device_storage(self) -> Any:
        """The DeviceBuffer holding the whole array, or None when the array
        lives in host memory (or is a view); waits for the producing
        operation."""
        if not self._storage.filled:
            self._sync()
        return self._storage.device if self._view is None else None

    # ---- properties -------------------------------------------------------------------

    def _read(self) -> np.ndarray:
        """The elements as a host array, once pending writes are done: the
        storage itself for host memory (a view for views), a fresh copy for
        device memory (rows of it for a view of device memory)."""
        self._sync()
        view = self._view
        if view is not None:
            data = view[1]
            if type(data) is TensorSpec:  # rows of an array in device memory
                host = self._storage.host
                return (host if host is not None else self._device().to_host())[view[0]]
            return data
        storage = self._storage
        if storage.host is not None:
            return storage.host
        return self._device().to_host()

    def _device(self) -> Any:
        device = self._storage.device
        if device is None:
            raise EngineError(f"this array on {self._ctx} has no elements: the operation that "
                              "was to produce them failed (its error was raised by an earlier "
                              "wait)")
        return device

    def _write_now(self, values: np.ndarray) -> None:
        """Inside a pushed operation: replaces the elements (same shape)."""
        storage = self._storage
        view = self._view
        if storage.deferred and self._settle(values):
            return
        if view is not None and type(view[1]) is TensorSpec and storage.host is None:
            # Rows of an array in device memory: the array's elements with
            # the rows replaced, written back whole (device pointers are
            # opaque: no copy into the middle of a buffer).
            device = self._device()
            whole = device.to_host()
            np.copyto(whole[view[0]], values, casting="unsafe")
            device.copy_from_host(whole)
        elif view is not None or storage.host is not None:
            np.copyto(self._read(), values, casting="unsafe")
        else:
            device = self._device()
            device.copy_from_host(np.asarray(values, dtype=device.spec.dtype))

    def _write(self, values: np.ndarray) -> None:
        """Writes a copy of values (same shape): at once when nothing is
        pending on the array, else pushed; the version is bumped when it is
        done."""
        guard = self._storage.guard
        if guard is not None:
            with guard:
                self._write_unguarded(values)
        else:
            self._write_unguarded(values)

    def _write_unguarded(self, values: np.ndarray) -> None:
        current = _engine.get()
        var = self._storage.var
        check_live(var)  # as run_now would; run_now_watching takes vars checked
        # run_now with nothing read: the grant the engine makes inline.
        if current.run_now_watching(lambda _run_ctx: self._write_now(values), self._ctx, (),
                                    (var,)):
            return
        snapshot = np.array(values, copy=True)  # the caller may change values meanwhile
        current.push_sync(lambda _run_ctx: self._write_now(snapshot), self._ctx, (), [var])

    def _assign(self, source: NDArray) -> None:
        """Pushes a write of source's elements (same shape) into this array."""
        self._push_write(lambda: self._write_now(source._read()), (source,))

    def _elements(self) -> np.ndarray | TensorSpec:
        """What tells the shape and dtype: the host array, or the device
        buffer's spec (waiting for the producing operation if needed)."""
        if self._view is not None:
            return self._view[1]
        storage = self._storage
        if not storage.filled:
            self._sync()
        return storage.host if storage.host is not None else self._device().spec

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._elements().shape)

    @property
    def dtype(self) -> np.dtype:
        return self._elements().dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def version(self) -> int:
        """Incremented by every write to the array (or to a view of it),
        once the write is done."""
        self._sync()
        return self._storage.var.version

    @property
    def stype(self) -> str:
        return "default"

    @property
    def T(self) -> NDArray:
        return invoke("transpose", [self], {})[0]

    # ---- conversion ---------------------------------------------------------------------

    def _reading(self) -> Any:
        """What a read from outside the engine holds while it copies the
        elements out: the storage's guard (an executor's lock, for its
        arguments and outputs: no forward writes them meanwhile), else
        nothing. Inside a pushed operation the engine orders the accesses."""
        guard = self._storage.guard
        return guard if guard is not None and not in_operation() else contextlib.nullcontext()

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the elements."""
        storage = self._storage
        if self._view is None and storage.host is None and not in_operation():
            # Device memory (an executor's output, an accelerator's result):
            # the wait and one copy out into a new array; when nothing is
            # pending, one copyFromAcc (_copy_out inlined).
            guard = storage.guard
            if guard is None:
                return self._copy_out()
            with guard:
                var, device = storage.var, storage.device
                if (var._writing or var._pending or var.exception is not None
                        or device is None or storage.host is not None):
                    return self._copy_out()
                return device.to_host()  # type: ignore[no-any-return]
        with self._reading():
            values = self._read()
            # Device memory was just copied out into a fresh array: that is the copy.
            fresh = self._view is None and self._storage.host is None
            return values if fresh else np.array(values, copy=True)

    def _copy_out(self) -> np.ndarray:
        """asnumpy() of a whole array that was not in host memory when
        asked: after its pending writes, a copy of its elements."""
        storage = self._storage
        var = storage.var
        if var._writing or var._pending or var.exception is not None:  # else nothing to wait for
            _engine.get().wait_to_read(var)
        if storage.host is not None:  # a pending result that landed in host memory
            return np.array(storage.host, copy=True)
        return self._device().to_host()

    def asscalar(self) -> Any:
        if self.size != 1:
            raise TensorError(f"asscalar() needs one element, the array has shape {self.shape}")
        with self._reading():
            return self._read().reshape(()).item()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        with self._reading():
            values = self._read()
            return np.array(values, dtype=dtype, copy=True) if copy or dtype is not None \
                else values

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        self._sync()
        storage = self._storage
        if (storage.host is None or storage.deferred) and (self._view is None
                                                           or self._device_view):
            raise ContextError(f"{self._ctx}: arrays in device memory cannot be exported "
                               "through DLPack; copy them to mx.cpu() first")
        return self._read().__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return NDArray(self._read().astype(dtype), self._ctx)

    def copy(self) -> NDArray:
        return self.copyto(self._ctx)

    def copyto(self, other: NDArray | Context) -> NDArray:
        """Copies into another array (same shape) or to a new array on a
        context; the copy is pushed (to the accelerator's worker when either
        side is one)."""
        if isinstance(other, Context):
            if isinstance(_engine.get(), NaiveEngine):
                return NDArray(self.asnumpy(), other)
            shape, dtype = self._spec_hint()
            target = NDArray._pending(other, shape, dtype)
            _engine.get().push_sync(
                lambda _run_ctx: target._take(np.array(self._read(), copy=True)),
                other if other.is_accelerator else self._ctx, [self._var], [target._var])
            return target
        if not isinstance(other, NDArray):
            raise TensorError(f"copyto() takes an NDArray or a Context, got {type(other).__name__}")
        mine, theirs = self._spec_hint()[0], other._spec_hint()[0]
        if theirs != mine:
            raise TensorError(f"copyto(): shapes differ, {mine} and {theirs}")
        other._assign(self)
        return other

    def as_in_context(self, context: Context) -> NDArray:
        return self if context == self._ctx else self.copyto(context)

    def wait_to_read(self) -> None:
        """Blocks until the pending writes of the array finish; raises the
        failure of the operation that was to write it, if it failed."""
        _engine.get().wait_to_read(self._storage.var)

    def reshape(self, *shape: Any, **kwargs: Any) -> NDArray:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return invoke("Reshape", [self], {"shape": tuple(shape), **kwargs})[0]

    # ---- indexing -------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> NDArray:
        storage = self._storage
        # Deferred zeros count as device memory: a view of the host zeros
        # would not see the device buffer the first whole write makes.
        if type(key) is slice and self._view is None and (storage.host is None
                                                          or storage.deferred):
            taken = self._device_rows(key)
            if taken is not None:
                return taken
        key = _host_key(key)
        source = self._read()
        values = source[key]
        in_host_memory = (storage.host is not None and not storage.deferred) or (
            self._view is not None and not self._device_view)
        if in_host_memory and isinstance(values, np.ndarray) and np.may_share_memory(values,
                                                                                      source):
            return NDArray._from_view(self, key, values)
        return NDArray(np.array(values), self._ctx)

    def _device_rows(self, key: slice) -> NDArray | None:
        """self[key] for an array in an accelerator's memory and a slice of
        rows with step 1: a view, as MXNet's basic slicing on the first axis
        is (it shares the array's storage, engine var and version). Device
        pointers are opaque to the host (docs/abi.md), so the view is kept
        host-side as (rows, their shape and dtype) and made contiguous only
        when something needs its elements: a read copies the array out and
        takes the rows, an operator gets them copied in, a write replaces
        the rows in the array's elements and writes them back whole. None
        for other arrays and slices (and empty selections)."""
        if not self._ctx.is_accelerator or key.step not in (None, 1):
            return None
        shape, dtype = _hint(self)
        if not shape or not _uses_device_memory(self._ctx, dtype):
            return None
        begin, end, _ = key.indices(shape[0])
        if end <= begin:
            return None
        return NDArray._from_view(self, slice(begin, end),
                                  TensorSpec((end - begin, *shape[1:]), dtype))

    def __setitem__(self, key: Any, value: Any) -> None:
        """Pushed; with a value from the host (not an NDArray) it also waits
        for the write, as MXNet's synchronous copy from the CPU does."""
        key = _host_key(key)
        from_host = not isinstance(value, NDArray)
        if isinstance(value, np.ndarray):
            value = np.array(value, copy=True)
        self._check_assignable(key, value)

        def write() -> None:
            source = value._read() if isinstance(value, NDArray) else value
            storage = self._storage
            if (storage.host is not None and not storage.deferred) or (
                    self._view is not None and not self._device_view):
                self._read()[key] = source
            else:
                values = self._read()
                values[key] = source
                self._write_now(values)

        self._push_write(write, () if from_host else (value,))
        if from_host:
            self._sync()

    def _check_assignable(self, key: Any, value: Any) -> None:
        """Raises TensorError, before anything is pushed, when value cannot
        be written into self[key] (a shape that does not broadcast, a key
        out of range): numpy would raise inside the write."""
        shape = self._spec_hint()[0]
        try:
            target = np.broadcast_to(np.zeros((), np.uint8), shape)[key].shape
        except (IndexError, TypeError, ValueError) as error:
            raise TensorError(f"cannot assign to [{key!r}] of an array of shape {shape}: "
                              f"{error}") from None
        given = value._spec_hint()[0] if isinstance(value, NDArray) else np.shape(value)
        try:
            fits = np.broadcast_shapes(tuple(given), target) == target
        except ValueError:
            fits = False
        if not fits:
            raise TensorError(f"cannot assign a value of shape {tuple(given)} to [{key!r}] of an "
                              f"array of shape {shape} (the selection has shape {target})")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d NDArray")
        return self.shape[0]

    def __iter__(self) -> Any:
        return (self[k] for k in range(len(self)))

    def __bool__(self) -> bool:
        if self.size != 1:
            raise TensorError("the truth value of an NDArray with more than one element is "
                              "ambiguous")
        return bool(self.asscalar())

    # ---- arithmetic -----------------------------------------------------------------------------

    def _binary(self, other: Any, op: str, scalar_op: str) -> NDArray:
        if isinstance(other, NDArray):
            inputs = [self, other]
            if type(self) is NDArray and type(other) is NDArray:  # invoke() for dense arrays
                plan = _call_plan(op, inputs, {})
                if plan is not None:
                    return plan.call(inputs, None)[0]
            return invoke(op, inputs, {})[0]
        if type(other) in (int, float) or isinstance(other, (numbers.Real, np.number)):
            attrs = {"scalar": float(other)}
            if type(self) is NDArray:
                plan = _call_plan(scalar_op, [self], attrs)
                if plan is not None:
                    return plan.call([self], None)[0]
            return invoke(scalar_op, [self], attrs)[0]
        if isinstance(other, np.ndarray):
            return invoke(op, [self, NDArray(other.astype(self.dtype), self._ctx)], {})[0]
        return NotImplemented

    def _inplace(self, result: NDArray) -> NDArray:
        if result._spec_hint()[0] != self._spec_hint()[0]:
            raise TensorError(f"in-place result has shape {result.shape}, not {self.shape}")
        self._assign(result)
        return self

    def __add__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_add", "_plus_scalar")

    __radd__ = __add__

    def __sub__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_sub", "_minus_scalar")

    def __rsub__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_sub", "_rminus_scalar") if not isinstance(
            other, NDArray) else other.__sub__(self)

    def __mul__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_mul", "_mul_scalar")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_div", "_div_scalar")

    def __rtruediv__(self, other: Any) -> NDArray:
        return invoke("_rdiv_scalar", [self], {"scalar": float(other)})[0]

    def __mod__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_mod", "_mod_scalar")

    def __pow__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_power", "_power_scalar")

    def __rpow__(self, other: Any) -> NDArray:
        return invoke("_rpower_scalar", [self], {"scalar": float(other)})[0]

    def __neg__(self) -> NDArray:
        return invoke("_mul_scalar", [self], {"scalar": -1.0})[0]

    def __abs__(self) -> NDArray:
        return invoke("abs", [self], {})[0]

    def _inplace_binary(self, other: Any, op: str, scalar_op: str) -> NDArray:
        """self <op>= other as one operation writing self (MXNet's in-place
        operator), when its result has self's shape; otherwise computed
        into a new array and assigned (which refuses another shape)."""
        if isinstance(other, NDArray):
            inputs, name, attrs = [self, other], op, {}
        elif type(other) in (int, float) or isinstance(other, (numbers.Real, np.number)):
            inputs, name, attrs = [self], scalar_op, {"scalar": float(other)}
        else:
            return self._inplace(self._binary(other, op, scalar_op))
        plan = _call_plan(name, inputs, attrs)
        if plan is not None and len(plan.specs) == 1 and plan.specs[0][0] == _hint(self)[0]:
            plan.call(inputs, self)
            return self
        return self._inplace(invoke(name, inputs, attrs)[0])

    def __iadd__(self, other: Any) -> NDArray:
        return self._inplace_binary(other, "broadcast_add", "_plus_scalar")

    def __isub__(self, other: Any) -> NDArray:
        return self._inplace_binary(other, "broadcast_sub", "_minus_scalar")

    def __imul__(self, other: Any) -> NDArray:
        return self._inplace_binary(other, "broadcast_mul", "_mul_scalar")

    def __itruediv__(self, other: Any) -> NDArray:
        return self._inplace_binary(other, "broadcast_div", "_div_scalar")

    def __eq__(self, other: Any) -> NDArray:  # type: ignore[override]
        return self._binary(other, "broadcast_equal", "_equal_scalar")

    def __ne__(self, other: Any) -> NDArray:  # type: ignore[override]
        return self._binary(other, "broadcast_not_equal", "_not_equal_scalar")

    def __gt__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_greater", "_greater_scalar")

    def __ge__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_greater_equal", "_greater_equal_scalar")

    def __lt__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_lesser", "_lesser_scalar")

    def __le__(self, other: Any) -> NDArray:
        return self._binary(other, "broadcast_lesser_equal", "_lesser_equal_scalar")

    __hash__ = None  # type: ignore[assignment]  # mutable, and == is element-wise

    def __repr__(self) -> str:
        shape = "x".join(map(str, self.shape)) or "scalar"
        return f"\n{self.asnumpy()}\n<NDArray {shape} @{self._ctx}>"


def _host_key(key: Any) -> Any:
    if isinstance(key, NDArray):
        return key.asnumpy().astype(np.int64)
    if isinstance(key, tuple):
        return tuple(_host_key(part) for part in key)
    return key


# ---- running operators -----------------------------------------------------------------


def invoke(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any],
           out: NDArray | Sequence[NDArray] | None = None) -> list[NDArray]:
    """Runs a registered operator on NDArrays; returns its outputs (written
    into out when given). The operator is pushed to the engine when its
    output shapes can be inferred, else it runs now. A call whose signature
    was planned before runs its plan (see _CallPlan); calls with sparse
    operands take the sparse rules first and are never planned."""
    sparse = False
    for array in inputs:  # a plain NDArray is dense: no stype call
        if type(array) is not NDArray and array.stype != "default":
            sparse = True
            break
    if sparse:
        from .sparse_ops import invoke_sparse  # (sparse_ops imports this module)

        handled = invoke_sparse(op_name, inputs, attrs, out)
        if handled is not None:
            return handled
        return _invoke_unplanned(op_name, inputs, attrs, out)
    plan = _call_plan(op_name, inputs, attrs)
    if plan is not None:
        return plan.call(inputs, out)
    return _invoke_unplanned(op_name, inputs, attrs, out)


def _invoke_unplanned(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any],
                      out: NDArray | Sequence[NDArray] | None) -> list[NDArray]:
    """invoke() worked out from scratch: the first call of a signature, and
    every call that cannot be planned."""
    op = registry.get(op_name)
    parsed = op.parse(attrs)
    contexts = {array.context for array in inputs}
    if len(contexts) > 1:
        raise ContextError(f"{op_name}: inputs are on different contexts: "
                           f"{', '.join(sorted(map(str, contexts)))}")
    ctx = contexts.pop() if contexts else current_context()
    engine = _engine.get()
    specs = _inferred(op, parsed, inputs)
    if specs is not None:
        _check_planned(op_name, inputs, specs, ctx)
    if specs is None or isinstance(engine, NaiveEngine):
        return _invoke_now(op, parsed, inputs, ctx, out)
    if out is None:
        targets = [NDArray._pending(ctx, shape, dtype) for shape, dtype in specs]
    else:
        targets = [out] if isinstance(out, NDArray) else list(out)
        if len(targets) != len(specs):
            raise OperatorError(f"{op_name}: {len(specs)} outputs, {len(targets)} out arrays")
        for target, (shape, _) in zip(targets, specs):
            if target._spec_hint()[0] != shape:
                raise TensorError(f"{op_name}: out has shape {target.shape}, the result {shape}")
    fresh = out is None

    def run(_run_ctx: Any) -> None:
        accelerated = _on_accelerator(op, parsed, inputs, ctx)
        results: Sequence[Any] = accelerated if accelerated is not None \
            else op.run(parsed, [array._read() for array in inputs])
        if len(results) != len(targets):
            raise OperatorError(f"{op_name}: {len(results)} outputs, {len(targets)} expected")
        for target, result in zip(targets, results):
            if fresh:
                target._take(result)
                continue
            values = result._read() if isinstance(result, NDArray) else np.asarray(result)
            if target.shape != values.shape:
                raise TensorError(f"{op_name}: out has shape {target.shape}, the result "
                                  f"{values.shape}")
            target._write_now(values)

    engine.push_sync(run, ctx, [array._storage.var for array in inputs],
                     [target._storage.var for target in targets])
    return targets


# NDArray subclasses whose instances are dense arrays like NDArray's for the
# operators' planned calls (call_plan): an executor's outputs
# (acc_host.runtime.executor_output) register with plan_as_ndarray. Checked
# after `type(x) is NDArray`, so a plain array pays nothing.
_PLANNED_SUBCLASSES: set[type] = set()


def plan_as_ndarray(cls: type) -> None:
    """Lets the operators plan calls on instances of cls, an NDArray
    subclass that changes none of the storage's meaning (a dense array of
    its shape and dtype, in _Storage), as they plan calls on NDArrays."""
    if not issubclass(cls, NDArray) or issubclass(cls, BaseSparseNDArray):
        raise TypeError(f"{cls.__name__} is not a dense NDArray subclass")
    _PLANNED_SUBCLASSES.add(cls)


def _inferred(op: registry.OpDef, attrs: Any, inputs: Sequence[NDArray]
              ) -> list[tuple[tuple[int, ...], np.dtype]] | None:
    """The output shapes and dtypes by the registry's inference, which
    validates the inputs before anything runs: a refusal is raised here, as
    the operator's typed error with the inputs' shapes and dtypes added. None
    when inference cannot tell before running (an input whose shape only
    running tells); the operator then runs now."""
    names = op.input_names(attrs)
    if len(inputs) != len(names):
        raise OperatorError(f"{op.name}: {len(inputs)} inputs given, {len(names)} expected "
                            f"({', '.join(names)})")
    hints = [array._spec_hint() for array in inputs]
    try:
        _, shapes = op.infer_shape(attrs, [shape for shape, _ in hints])
        _, dtypes = op.infer_type(attrs, [dtype for _, dtype in hints])
    except registry.ShapeUnknownError:
        return None
    except AccHostError as error:
        described = registry.describe_inputs(names, hints)
        message = str(error)
        if not message.startswith(op.name):
            message = f"{op.name}: {message}"
        error.args = (f"{message} (inputs: {described})", *error.args[1:])
        raise
    except Exception as error:  # noqa: BLE001  (the safety net: typed, naming the op)
        raise op.internal_error(error, attrs, hints) from error
    if len(shapes) != len(dtypes) or len(shapes) != len(op.output_names(attrs)):
        return None
    if any(shape is None for shape in shapes) or any(dtype is None for dtype in dtypes):
        return None
    return [(tuple(int(extent) for extent in shape), np.dtype(dtype))
            for shape, dtype in zip(shapes, dtypes)]


def _check_planned(op_name: str, inputs: Sequence[NDArray],
                   specs: Sequence[tuple[tuple[int, ...], np.dtype]], ctx: Context) -> None:
    """Refuses a call whose planned memory passes the allocation limit,
    before anything is allocated for it (AllocationTooLargeError): its
    outputs, and on an accelerator context one copy of every input (to the
    device for the plugin, or to the host when the plugin declines and the
    CPU runs it). An operator whose output shapes only running tells is
    checked per array as its outputs are made."""
    # Per call: the sums in plain integers, the message only for a refusal.
    outputs = sum(math.prod(shape) * dtype.itemsize for shape, dtype in specs)
    copies = 0
    if ctx.is_accelerator:
        for array in inputs:
            shape, dtype = array._spec_hint()
            copies += math.prod(shape) * dtype.itemsize
    if outputs + copies > limits.limit():
        limits.check_bytes(outputs + copies, f"{op_name}: the planned memory of the call "
                           f"({outputs} bytes of outputs, {copies} of input copies)")


def _invoke_now(op: registry.OpDef, parsed: Any, inputs: Sequence[NDArray], ctx: Context,
                out: NDArray | Sequence[NDArray] | None) -> list[NDArray]:
    """Runs the operator in the calling thread, after the pending writes of
    its inputs (the NaiveEngine path, and operators without inference)."""
    op_name = op.name
    for array in inputs:
        array._sync()
    accelerated = _on_accelerator(op, parsed, inputs, ctx)
    if accelerated is not None and out is None:
        return accelerated
    results = [array._read() for array in accelerated] if accelerated is not None \
        else op.run(parsed, [array._read() for array in inputs])
    if out is None:
        return [NDArray(np.asarray(result), ctx) for result in results]
    targets = [out] if isinstance(out, NDArray) else list(out)
    if len(targets) != len(results):
        raise OperatorError(f"{op_name}: {len(results)} outputs, {len(targets)} out arrays")
    for target, result in zip(targets, results):
        if target.shape != np.shape(result):
            raise TensorError(f"{op_name}: out has shape {target.shape}, the result "
                              f"{np.shape(result)}")
        target._write(np.asarray(result))
    return targets


def _operand(array: NDArray) -> dispatch.Operand:
    """array as dispatch reads it: shape and dtype now, its device buffer or
    host values when the call needs them."""
    return dispatch.Operand(array.shape, array.dtype, lambda: array._device_storage,
                            lambda: np.asarray(array))


def _on_accelerator(op: registry.OpDef, attrs: Any, inputs: Sequence[NDArray],
                    ctx: Context) -> list[NDArray] | None:
    """The outputs as computed by ctx's accelerator, or None for the CPU path
    (a CPU context, or an operator the plugin declines)."""
    if not ctx.is_accelerator:
        return None
    results = dispatch.run_on_context(op, attrs, [_operand(array) for array in inputs], ctx)
    if results is None:
        return None
    return [NDArray._adopt(result, ctx) if isinstance(result, DeviceBuffer)
            else NDArray(result, ctx) for result in results]


_functions: dict[str, Callable[..., Any]] = {}


def _operator_function(op_name: str) -> Callable[..., Any]:
    """mx.nd.<op_name>, made once per name."""
    function = _functions.get(op_name)
    if function is None:
        function = _functions[op_name] = _make_operator_function(op_name)
    return function


def _make_operator_function(op_name: str) -> Callable[..., Any]:
    op = registry.get(op_name)
    counts_arguments = "num_args" in op._params_by_name

    def run(*args: Any, out: Any = None, name: str | None = None, ctx: Context | None = None,
            **kwargs: Any) -> Any:
        # A call of a signature planned before, with its arrays first and
        # keyword attributes: its plan (which the full path below made, so
        # the same call passed every check there).
        if args and len(args) <= 3 and ctx is None and (
                type(args[-1]) is NDArray or type(args[-1]) in _PLANNED_SUBCLASSES):
            attrs = {key: value for key, value in kwargs.items() if value is not None} \
                if kwargs else {}
            if counts_arguments and "num_args" not in attrs:
                attrs["num_args"] = len(args)
            if not attrs or not any(type(value) is NDArray for value in attrs.values()):
                plan = _planned(op_name, args, attrs)
                if plan is not None:
                    results = plan.call(args, out)
                    return results[0] if len(results) == 1 else results
        # As in MXNet: the leading positional NDArrays are inputs, the
        # positional values after them the attributes in declared order
        # (mx.nd.sum(x, 1) is axis=1).
        arrays: list[NDArray] = []
        rest = list(args)
        while rest and isinstance(rest[0], NDArray):
            arrays.append(rest.pop(0))
        if any(isinstance(value, NDArray) for value in rest):
            raise OperatorError(f"{op_name}: NDArray inputs come before the positional "
                                "attributes")
        kwargs = positional_attributes(op_name, [param.name for param in op.params], rest,
                                       kwargs)
        named = {key: value for key, value in kwargs.items() if isinstance(value, NDArray)}
        attrs = {key: value for key, value in kwargs.items()
                 if not isinstance(value, NDArray) and value is not None}
        if "num_args" in op._params_by_name and "num_args" not in attrs:
            attrs["num_args"] = len(arrays) + len(named)
        parsed = op.parse(attrs)
        input_names = op.input_names(parsed)
        unknown = sorted(set(named) - set(input_names))
        if unknown:
            raise OperatorError(f"{op_name}: {', '.join(unknown)} are not inputs "
                                f"({', '.join(input_names)})")
        inputs = list(arrays)
        for input_name in input_names[len(arrays):]:
            if input_name not in named:
                raise OperatorError(f"{op_name}: input {input_name!r} is missing")
            inputs.append(named[input_name])
        with ctx or (inputs[0].context if inputs else current_context()):
            results = invoke(op_name, inputs, attrs, out)
        return results[0] if len(results) == 1 else results

    run.__name__ = op_name
    run.__doc__ = op.doc
    return run


def __getattr__(name: str) -> Callable[..., Any]:
    """mx.nd.<Op>(...) for every registered operator."""
    function = _functions.get(name)
    if function is not None:
        return function
    if registry.find(name) is not None:
        function = _operator_function(name)
        if not hasattr(builtins, name):
            # Kept as a module attribute, so that the next mx.nd.<name> finds
            # it without this call; not for sum, max, abs, ..., which would
            # shadow the builtins this module's own code uses.
            globals()[name] = function
        return function
    raise AttributeError(f"module 'acc_host.ndarray' has no attribute {name!r}")


# ---- creation --------------------------------------------------------------------------


def _context(ctx: Context | None) -> Context:
    return ctx if ctx is not None else current_context()


def array(source: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """An NDArray with a copy of source. dtype defaults to source's dtype for
    numpy arrays and NDArrays, float32 otherwise (as MXNet). A sparse
    NDArray or a scipy.sparse matrix gives a sparse array, as in MXNet."""
    if isinstance(source, sparse.BaseSparseNDArray) or sparse.is_scipy_sparse(source):
        return sparse.array(source, ctx=ctx, dtype=dtype)
    if isinstance(source, NDArray):
        values = source.asnumpy()
    elif isinstance(source, np.ndarray):
        values = source
    else:
        values = np.asarray(source, dtype=_DEFAULT_DTYPE if dtype is None else dtype)
    values = np.array(values, dtype=dtype or values.dtype, copy=True, order="C")
    TensorSpec.of(values)  # rejects dtypes no plugin can hold
    return NDArray(values, _context(ctx))


def _filled(shape: Any, value: Any, ctx: Context | None, dtype: Any) -> NDArray:
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if not all(isinstance(extent, numbers.Integral) for extent in shape):
        raise InvalidArgumentError(f"shape {shape} has an extent that is not an integer")
    if any(int(extent) < 0 for extent in shape):
        raise InvalidArgumentError(f"negative extent in shape {shape}")
    dtype = dtype or _DEFAULT_DTYPE
    limits.check_array(shape, dtype, "an array")
    # zeros from calloc: the pages are the kernel's zero page until written
    # (simple_bind's weights, written by copy_params_from next), np.full
    # would write them all first
    values = np.zeros(shape, dtype) if type(value) is int and value == 0 else \
        np.full(shape, value, dtype=dtype)
    return NDArray(values, _context(ctx))


def empty(shape: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    return _filled(shape, 0, ctx, dtype)


def zeros(shape: Any, ctx: Context | None = None, dtype: Any = None, **kwargs: Any) -> NDArray:
    """Zeros; ``stype='csr'`` or ``'row_sparse'`` gives a sparse array."""
    if kwargs.get("stype") not in (None, "default"):
        return sparse.zeros(kwargs["stype"], shape, ctx=ctx, dtype=dtype)
    return _filled(shape, 0, ctx, dtype)


def ones(shape: Any, ctx: Context | None = None, dtype: Any = None, **kwargs: Any) -> NDArray:
    return _filled(shape, 1, ctx, dtype)


def full(shape: Any, val: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    return _filled(shape, val, ctx, dtype)


def arange(start: float, stop: float | None = None, step: float = 1.0, repeat: int = 1,
           ctx: Context | None = None, dtype: Any = None) -> NDArray:
    values = np.arange(start, stop, step, dtype=dtype or _DEFAULT_DTYPE)
    return NDArray(np.repeat(values, repeat) if repeat > 1 else values, _context(ctx))


def from_dlpack(source: Any) -> NDArray:
    """An NDArray sharing memory with a DLPack-capable host array."""
    return NDArray(np.from_dlpack(source))


def concatenate(arrays: Sequence[NDArray], axis: int = 0) -> NDArray:
    return invoke("Concat", list(arrays), {"dim": axis, "num_args": len(arrays)})[0]


def waitall() -> None:
    """Waits for every pushed operation; raises the first failure no wait
    has reported yet (see docs/engine.md). Then gives the pooled freed
    device buffers back to their plugins (acc_host.abi.memory)."""
    try:
        _engine.wait_for_all()
    finally:
        release_pooled()


# ---- files ------------------------------------------------------------------------------


def save(fname: str | Path, data: NDArray | Sequence[NDArray] | Mapping[str, NDArray]) -> None:
    """MXNet's binary NDArray file: a list, or a dict keyed by name."""
    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, Mapping):
        names: list[str] | None = list(data)
        arrays = [_saved(value) for value in data.values()]
    else:
        names, arrays = None, [_saved(value) for value in data]
    params_file.save(fname, arrays, names)


def _saved(array: NDArray) -> Any:
    """What params_file writes for array: its values, or a sparse record."""
    if array.stype != "default":
        return sparse.to_record(array)
    return array.asnumpy()


def load(fname: str | Path) -> list[NDArray] | dict[str, NDArray]:
    """The arrays of an MXNet NDArray file: a dict when it stores names,
    else a list."""
    arrays, names = params_file.load(fname)
    # params_file gives each dense array writable storage of its own (views
    # of the file's buffer that do not overlap): taken over, not copied again
    wrapped = [sparse.from_record(values) if isinstance(values, params_file.SparseRecord)
               else NDArray(values) for values in arrays]
    return dict(zip(names, wrapped)) if names else wrapped


# Imported last, when NDArray and the helpers above are defined: the planned
# calls (acc_host.ndarray.call_plan), which read them, and mx.nd.sparse with
# the sparse array classes, which subclass NDArray.
from . import sparse  # noqa: E402
from .call_plan import _call_plan, _hint, _planned  # noqa: E402
from .sparse import BaseSparseNDArray, CSRNDArray, RowSparseNDArray  # noqa: E402
from .sparse_ops import cast_storage  # noqa: E402

__all__ += ["sparse", "BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "cast_storage"]
