"""Imperative calls planned per signature: what ``mx.nd.<Op>(...)`` and the
NDArray operators work out once and reuse.

A call's signature is its operator, its attributes with their types, its
context and its inputs' shapes and dtypes. Its first call goes the full
way (``ndarray._invoke_unplanned``'s checks: the attributes parsed, the
registry's inference validating the inputs, the planned memory checked),
and a :class:`_CallPlan` keeps the result: the parsed attributes, the
output shapes and dtypes, the planned bytes and, on an accelerator, the
prepared call (:func:`acc_host.ndarray.dispatch.prepare`). Later calls of
the signature run the plan. A refusal is never planned (it is raised on
every call); the allocation limit and the operator's version are read per
call. Small calls run on the calling thread when the engine grants them at
once (``Engine.run_inline``); see docs/engine.md and docs/performance.md.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import engine as _engine
from .. import limits
from ..abi.memory import DeviceBuffer
from ..context import Context
from ..engine.base import check_live
from ..errors import AccHostError, OperatorError, TensorError
from ..ops import registry
from ..ops.tensor import planned_kernel, writes_out
from . import (
    _PLANNED_SUBCLASSES,
    NDArray,
    _check_planned,
    _inferred,
    _Storage,
    _uses_device_memory,
    dispatch,
)

__all__ = ["PLAN_CAPACITY", "INLINE_BYTES"]

#: Signatures planned at most (the table is emptied when it is full).
PLAN_CAPACITY = 4096
#: A planned call whose inputs and outputs take at most this many bytes runs
#: on the calling thread when the engine can grant it at once (nothing
#: pending on its arrays): a hand-off to a worker and back costs tens of
#: microseconds, more than such an operator's whole work. Larger calls are
#: pushed, and run while the caller goes on.
INLINE_BYTES = 1 << 16

_plans: dict[Any, _CallPlan] = {}

#: A call planning at most this many bytes is within the allocation limit
#: whenever MXNET_ACC_MAX_ALLOC_BYTES is unset (the limit is then the
#: machine's memory), so the limit is read only when the variable is set.
_ALWAYS_WITHIN_LIMIT = 1 << 20
_ENVIRON: Any = getattr(os.environ, "_data", None)
_LIMIT_KEY: Any = os.environ.encodekey(limits.LIMIT_VARIABLE) \
    if _ENVIRON is not None else None  # type: ignore[attr-defined]
_new_array = NDArray.__new__


def _limit_set() -> bool:
    """Whether MXNET_ACC_MAX_ALLOC_BYTES is set (os.environ's plain dict
    read where the platform keeps one; writes to os.environ go through)."""
    if _ENVIRON is None:
        return limits.LIMIT_VARIABLE in os.environ
    return _LIMIT_KEY in _ENVIRON


def _hint(array: NDArray) -> tuple[tuple[int, ...], np.dtype]:
    """array._spec_hint(), the common cases first."""
    if array._view is None:
        storage = array._storage
        host = storage.host
        if host is not None:
            return host.shape, host.dtype
        if storage.device is not None:
            spec = storage.device.spec
            return spec.shape, spec.dtype
        if storage.spec is not None:
            return storage.spec
    return array._spec_hint()


def _signature(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any]
               ) -> tuple[Any, ...] | None:
    """The key of a call's plan; None for a call without inputs. An input
    that is not a plain NDArray on the first input's context is None in the
    key (such a call is not planned). The key may hold an unhashable
    attribute value: the lookups catch the TypeError (such a call is not
    planned either)."""
    if not inputs:
        return None
    first = inputs[0]
    if type(first) is not NDArray and type(first) not in _PLANNED_SUBCLASSES:
        return None
    ctx = first._ctx
    hints: list[tuple[tuple[int, ...], np.dtype] | None] = []
    for array in inputs:  # _hint's common cases, without its frame
        kind = type(array)
        if (kind is not NDArray and kind not in _PLANNED_SUBCLASSES) or (
                array._ctx is not ctx and array._ctx != ctx):
            hints.append(None)
            continue
        if kind is NDArray and array._view is None:
            storage = array._storage
            host = storage.host
            if host is not None:
                hints.append((host.shape, host.dtype))
                continue
            device = storage.device
            if device is not None:
                spec = device.spec
                hints.append((spec.shape, spec.dtype))
                continue
        hints.append(_hint(array))
    return (op_name, ctx.device_type, ctx.device_id, tuple(hints),
            tuple([(name, type(value), value) for name, value in attrs.items()])
            if attrs else ())


def _lookup(key: tuple[Any, ...]) -> _CallPlan | None:
    """The plan stored under key; None as well for a key that does not hash
    (an unhashable attribute value) or a plan of an operator registered
    anew since (a test's or an extension's replacement): the caller makes
    a new one, or takes the full path."""
    try:
        plan = _plans.get(key)
    except TypeError:  # an unhashable attribute value
        return None
    if plan is not None and plan.op is not registry.find(key[0]):
        return None
    return plan


def _planned(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any]
             ) -> _CallPlan | None:
    """The plan of a signature that was called before, else None (nothing
    is worked out: the caller takes its full path, which checks the call)."""
    key = _signature(op_name, inputs, attrs)
    return None if key is None else _lookup(key)


def _call_plan(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any]
               ) -> _CallPlan | None:
    """The plan of this call's signature (operator, attributes with their
    types, context, input shapes and dtypes), made at its first call; None
    for a call that is not planned (no inputs, inputs on several contexts,
    unhashable attributes, outputs that inference cannot tell): the caller
    works it out from scratch, refusals included."""
    key = _signature(op_name, inputs, attrs)
    if key is None:
        return None
    plan = _lookup(key)
    if plan is not None:
        return plan
    try:
        hash(key)
    except TypeError:  # an unhashable attribute value
        return None
    if None in key[3]:  # an input that is not a plain NDArray on the context
        return None
    ctx = inputs[0]._ctx
    op = registry.get(op_name)
    parsed = op.parse(attrs)
    specs = _inferred(op, parsed, inputs)
    if specs is None:
        return None
    _check_planned(op_name, inputs, specs, ctx)
    plan = _CallPlan(op, parsed, ctx, [_hint(array) for array in inputs], specs)
    if len(_plans) >= PLAN_CAPACITY:
        _plans.clear()
    _plans[key] = plan
    return plan


class _CallPlan:
    """What an imperative call of one signature works out before it runs,
    once: the operator and its parsed attributes, the output shapes and
    dtypes by the registry's inference (which validated the inputs), the
    bytes it plans (checked against the allocation limit on every call,
    as the limit may change), where it runs (the accelerator's prepared
    call, acc_host.ndarray.dispatch, or the CPU), and whether it is small
    enough to run on the calling thread (INLINE_BYTES)."""

    __slots__ = ("op", "attrs", "ctx", "specs", "nbytes", "inline", "prepared", "host_memory",
                 "kernel", "into")

    def __init__(self, op: registry.OpDef, attrs: Any, ctx: Context,
                 inputs: Sequence[tuple[tuple[int, ...], np.dtype]],
                 specs: Sequence[tuple[tuple[int, ...], np.dtype]]) -> None:
        self.op = op
        self.attrs = attrs
        self.ctx = ctx
        self.specs = tuple(specs)
        outputs = sum(math.prod(shape) * dtype.itemsize for shape, dtype in specs)
        given = sum(math.prod(shape) * dtype.itemsize for shape, dtype in inputs)
        self.nbytes = outputs + (given if ctx.is_accelerator else 0)
        self.inline = outputs + given <= INLINE_BYTES
        self.prepared = dispatch.prepare(op, attrs, inputs, ctx) if ctx.is_accelerator \
            else None
        # Whether every output lives in host memory on ctx (the CPU, or a
        # plugin that works on host memory, for these dtypes).
        self.host_memory = not any(_uses_device_memory(ctx, dtype) for _, dtype in specs)
        # The CPU kernel with its shape work done (dot, sum), else op.compute.
        self.kernel = planned_kernel(op, attrs, inputs) if self.prepared is None else None
        # Whether the kernel writes an out array in host memory itself (a += 1
        # with no temporary): an element-wise kernel, of one output.
        self.into = self.kernel is not None and writes_out(self.kernel) and len(self.specs) == 1

    def call(self, inputs: Sequence[NDArray], out: NDArray | Sequence[NDArray] | None
             ) -> list[NDArray]:
        """Runs the call on inputs (of the planned signature): pushed with
        its arrays' vars, or run on the calling thread when it is small and
        the engine grants it at once. Returns the outputs (out when given)."""
        nbytes = self.nbytes
        if nbytes > _ALWAYS_WITHIN_LIMIT or _limit_set():  # the limit, read per call
            if nbytes > limits.limit():
                _check_planned(self.op.name, inputs, self.specs, self.ctx)
        if out is not None:
            return self._call_into(inputs, out)
        ctx = self.ctx
        targets = []
        mutate_list = []
        for spec in self.specs:  # NDArray._pending, the spec made once
            target = _new_array(NDArray)
            target._ctx = ctx
            storage = target._storage = _Storage(None)
            storage.spec = spec
            target._view = None
            targets.append(target)
            mutate_list.append(storage.var)
        count = len(inputs)
        if count == 1:
            var = inputs[0]._storage.var
            if var.deleted:
                check_live(var)
            const: tuple[Any, ...] = (var,)
        elif count == 2:
            var, other = inputs[0]._storage.var, inputs[1]._storage.var
            if var.deleted or other.deleted:
                check_live(var)
                check_live(other)
            const = (var,) if var is other else (var, other)
        else:
            reads = [array._storage.var for array in inputs]
            for var in reads:
                if var.deleted:
                    check_live(var)
            const = tuple(dict.fromkeys(reads))
        mutate = tuple(mutate_list)

        def run(_run_ctx: Any) -> None:
            self._run(inputs, targets, True)

        current = _engine.get()
        if not (self.inline and current.run_inline(run, ctx, const, mutate)):
            current.push_sync_normalized(run, ctx, const, mutate)
        return targets

    def _call_into(self, inputs: Sequence[NDArray], out: NDArray | Sequence[NDArray]
                   ) -> list[NDArray]:
        """call() writing out (the limit already checked)."""
        op_name = self.op.name
        ctx = self.ctx
        if type(out) is NDArray and len(self.specs) == 1 and out._storage.guard is None:
            # One plain array written (a += 1): normalize_vars's work inline.
            if _hint(out)[0] != self.specs[0][0]:
                raise TensorError(f"{op_name}: out has shape {out.shape}, the result "
                                  f"{self.specs[0][0]}")
            written = out._storage.var
            if written.deleted:
                check_live(written)
            read_vars = []
            for array in inputs:
                var = array._storage.var
                if var.deleted:
                    check_live(var)
                if var is not written and var not in read_vars:
                    read_vars.append(var)
            single = [out]

            def run_one(_run_ctx: Any) -> None:
                self._run(inputs, single, False)

            current = _engine.get()
            const_one, mutate_one = tuple(read_vars), (written,)
            if not (self.inline and current.run_inline(run_one, ctx, const_one, mutate_one)):
                current.push_sync_normalized(run_one, ctx, const_one, mutate_one)
            return single
        reads = [array._storage.var for array in inputs]
        targets = [out] if type(out) is NDArray or isinstance(out, NDArray) else list(out)
        if len(targets) != len(self.specs):
            raise OperatorError(f"{op_name}: {len(self.specs)} outputs, {len(targets)} "
                                "out arrays")
        for target, (shape, _) in zip(targets, self.specs):
            if _hint(target)[0] != shape:
                raise TensorError(f"{op_name}: out has shape {target.shape}, the result "
                                  f"{shape}")
        if len(targets) == 1:  # normalize_vars, for the one array written
            written = targets[0]._storage.var
            for var in (*reads, written):
                if var.deleted:
                    check_live(var)
            const = tuple([var for var in dict.fromkeys(reads) if var is not written])
            mutate: tuple[Any, ...] = (written,)
        else:
            const, mutate = _engine.base.normalize_vars(
                reads, [target._storage.var for target in targets])

        def run(_run_ctx: Any) -> None:
            self._run(inputs, targets, False)

        current = _engine.get()
        if len(targets) == 1:
            guard = targets[0]._storage.guard
            guards: tuple[Any, ...] = () if guard is None else (guard,)
        else:
            guards = tuple({id(guard): guard for guard in (
                target._storage.guard for target in targets) if guard is not None}.values())
        if not guards:
            if not (self.inline and current.run_inline(run, ctx, const, mutate)):
                current.push_sync_normalized(run, ctx, const, mutate)
            return targets
        with contextlib.ExitStack() as stack:  # an executor's arrays: see _push_write
            for guard in guards:
                stack.enter_context(guard)
            if not (self.inline and current.run_inline(run, ctx, const, mutate)):
                current.push_sync_normalized(run, ctx, const, mutate)
        return targets

    def _run(self, inputs: Sequence[NDArray], targets: Sequence[NDArray], fresh: bool) -> None:
        """Inside the operation: computes the outputs (on the accelerator
        when the plugin runs the call) into targets."""
        op = self.op
        results: Sequence[Any] | None = None
        prepared = self.prepared
        if prepared is not None:
            results = dispatch.run_prepared_buffers(
                prepared, [array._storage.device if array._view is None else None
                           for array in inputs],
                lambda: [_fast_operand(array) for array in inputs])
            if results is not None and len(results) == 1 and type(results[0]) is DeviceBuffer:
                storage = targets[0]._storage
                if fresh:  # the common cases first
                    storage.device = results[0]
                    return
                current = storage.device
                result = results[0]
                if (targets[0]._view is None and storage.guard is None and storage.host is None
                        and current is not None and current.library is result.library
                        and current.dev_id == result.dev_id
                        and current.spec.shape == result.spec.shape
                        and current.spec.dtype == result.spec.dtype):
                    storage.device = result  # out takes the result's buffer, as below
                    return
        if results is None:
            values = [array._read() for array in inputs]
            kernel = self.kernel
            if self.into and not fresh:
                target = targets[0]
                host = target._storage.host
                if (target._view is None and host is not None and host.flags.c_contiguous
                        and host.flags.writeable and (host.shape, host.dtype) == self.specs[0]):
                    try:
                        kernel(values, out=host)  # type: ignore[misc]
                    except AccHostError:
                        raise
                    except Exception as error:  # noqa: BLE001  (as below)
                        raise op.internal_error(error, self.attrs, values) from error
                    return
            try:
                results = kernel(values) if kernel is not None else op.compute(self.attrs, values)
            except AccHostError:
                raise
            except Exception as error:  # noqa: BLE001  (the safety net, as OpDef.run)
                raise op.internal_error(error, self.attrs, values) from error
        if len(results) != len(targets):
            raise OperatorError(f"{op.name}: {len(results)} outputs, {len(targets)} expected")
        for target, result in zip(targets, results):
            if fresh:
                storage = target._storage
                if type(result) is DeviceBuffer:
                    storage.device = result
                elif self.host_memory and type(result) is np.ndarray:
                    storage.host = result
                else:
                    target._take(result)
                continue
            storage = target._storage
            if type(result) is DeviceBuffer:
                current = storage.device
                if (target._view is None and storage.guard is None and storage.host is None
                        and current is not None and current.library is result.library
                        and current.dev_id == result.dev_id
                        and current.spec.shape == result.spec.shape
                        and current.spec.dtype == result.spec.dtype):
                    # out in device memory: it takes the result's buffer (no
                    # copy through the host). An executor's array (guard)
                    # keeps its own buffer, which its bound steps hold.
                    storage.device = result
                    continue
                written = result.to_host()
            else:
                written = np.asarray(result)
            host = storage.host
            if target._view is None and host is not None and not storage.deferred:
                if host.shape != written.shape:
                    raise TensorError(f"{op.name}: out has shape {host.shape}, the result "
                                      f"{written.shape}")
                np.copyto(host, written, casting="unsafe")
                continue
            if target.shape != written.shape:
                raise TensorError(f"{op.name}: out has shape {target.shape}, the result "
                                  f"{written.shape}")
            target._write_now(written)


def _fast_operand(array: NDArray) -> dispatch.Operand:
    """_operand for a planned call, inside its operation (the shape and
    dtype without waiting)."""
    shape, dtype = _hint(array)
    buffer = array._storage.device if array._view is None else None  # filled: in the operation
    return dispatch.Operand(shape, dtype, lambda: buffer, lambda: np.asarray(array))
