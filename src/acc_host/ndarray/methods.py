"""NDArray's fluent methods, as MXNet 1.9 has them: ``x.sum(axis=1)`` is
``mx.nd.sum(x, axis=1)``.

Each method runs the registered operator of the same name (so it runs on the
array's context, on its accelerator when the plugin supports the operator)
with the array as the first input; the operators the registry lacks
(acc_host.ops.compat: one_hot, sort, argsort, pick, flip, norm, ...) run on
the host and their results are placed on the array's context. Positional
arguments after the array are further array inputs (``x.take(indices)``),
then the operator's attributes in MXNet's order (``x.sum(1, True)`` is
``axis=1, keepdims=True``).
"""

from __future__ import annotations

from typing import Any

from ..errors import OperatorError, ShapeError
from ..ops import registry
from ..ops.compat import HOST_OPS

__all__ = ["NDArrayMethods", "FLUENT_OPERATORS", "host_functions", "positional_attributes",
           "split_arguments"]

#: method name -> operator name
FLUENT_OPERATORS = {name: name for name in (
    "abs", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "argmax", "argmin",
    "argsort", "broadcast_axes", "broadcast_like", "broadcast_to", "cbrt", "ceil", "clip",
    "cos", "cosh", "degrees", "exp", "expand_dims", "expm1", "fix", "flatten", "flip",
    "floor", "log", "log10", "log1p", "log2", "log_softmax", "max", "mean", "min", "nanprod",
    "nansum", "norm", "one_hot", "ones_like", "pad", "pick", "prod", "radians", "rcbrt",
    "reciprocal", "relu", "repeat", "reshape_like", "rint", "round", "rsqrt", "shape_array",
    "sigmoid", "sign", "sin", "sinh", "size_array", "slice", "slice_axis", "slice_like",
    "softmax", "sort", "split", "sqrt", "square", "squeeze", "sum", "swapaxes", "take", "tan",
    "tanh", "tile", "topk", "transpose", "trunc", "zeros_like")}


def split_arguments(op_name: str, array_type: type, first: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """(inputs, attributes) of a fluent call: first, then the leading
    positional arguments of array_type, are inputs; the positional arguments
    after them are the operator's attributes in their declared order."""

    op = HOST_OPS.get(op_name) or registry.get(op_name)
    inputs = [first]
    rest = list(args)
    while rest and isinstance(rest[0], array_type):
        inputs.append(rest.pop(0))
    return inputs, positional_attributes(op_name, [param.name for param in op.params], rest,
                                         kwargs)


def positional_attributes(op_name: str, names: list[str], values: list[Any],
                          kwargs: dict[str, Any]) -> dict[str, Any]:
    """kwargs with values added as the attributes names, in order (MXNet's
    positional attributes); an OperatorError for too many values or an
    attribute given twice."""
    if len(values) > len(names):
        raise OperatorError(f"{op_name}: {len(values)} positional attributes given, the "
                            f"operator has {len(names)} ({', '.join(names) or 'none'})")
    attrs = dict(kwargs)
    for name, value in zip(names, values):
        if name in attrs:
            raise OperatorError(f"{op_name}: attribute {name!r} given twice")
        attrs[name] = value
    return attrs


def run_on_host(op_name: str, inputs: list[Any], attrs: dict[str, Any], out: Any = None) -> Any:
    """A host operator (acc_host.ops.compat) on NDArrays; the results go to
    the first input's context (or into out)."""
    # The package imports this mixin: its array functions are reached at call time.
    from .. import ndarray

    op = HOST_OPS[op_name]
    parsed = op.parse({key: value for key, value in attrs.items() if value is not None})
    names = op.input_names(parsed)
    if len(inputs) != len(names) or not all(isinstance(x, ndarray.NDArray) for x in inputs):
        raise OperatorError(f"{op_name}: takes the NDArrays {', '.join(names)}; got "
                            f"{len(inputs)} inputs")
    op.infer_shape(parsed, [tuple(x.shape) for x in inputs])
    values = op.run(parsed, [x.asnumpy() for x in inputs])
    ctx = inputs[0].context
    results = [ndarray.array(value, ctx=ctx, dtype=value.dtype) for value in values]
    if out is not None:
        targets = out if isinstance(out, (list, tuple)) else [out]
        for target, result in zip(targets, results):
            result.copyto(target)
        return out
    return results[0] if len(results) == 1 else results


def _fluent(op_name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The package imports this mixin: its array functions are reached at call time.
        from .. import ndarray

        inputs, attrs = split_arguments(op_name, ndarray.NDArray, self, args, kwargs)
        if op_name in HOST_OPS:
            return run_on_host(op_name, inputs, attrs)
        return ndarray._operator_function(op_name)(*inputs, **attrs)

    method.__name__ = op_name
    method.__doc__ = f"``mx.nd.{op_name}(self, ...)``"
    return method


class NDArrayMethods:
    """The fluent methods (mixed into NDArray)."""

    __slots__ = ()

    def reshape_like(self, other: Any, **kwargs: Any) -> Any:
        return _fluent("reshape_like")(self, other, **kwargs)

    def softmin(self, axis: int = -1, temperature: float | None = None, **kwargs: Any) -> Any:
        """softmax of the negated values."""
        negated: Any = self * -1.0  # type: ignore[operator]
        if temperature is not None:
            kwargs["temperature"] = temperature
        return negated.softmax(axis=axis, **kwargs)

    def broadcast_to(self, shape: Any) -> Any:
        """Leading axes of extent 1 are added first when shape has more
        axes than the array (MXNet's method; the operator refuses that)."""

        shape = tuple(shape)
        current = tuple(self.shape)  # type: ignore[attr-defined]
        if len(shape) < len(current):
            raise ShapeError(f"broadcast_to: cannot broadcast {current} to {shape}: the "
                             "target has fewer axes")
        padded = (1,) * (len(shape) - len(current)) + current
        source = self.reshape(padded) if padded != current else self  # type: ignore[attr-defined]
        return _fluent("broadcast_to")(source, shape=shape)

    def argmax_channel(self) -> Any:
        """argmax over the last axis."""
        return _fluent("argmax")(self, axis=-1)

    def detach(self) -> Any:
        """The array itself: acc-host records no gradients to detach from."""
        return self

    def tostype(self, stype: str) -> Any:
        """The array in storage type stype: 'default' (itself), 'csr' or
        'row_sparse' (see :mod:`acc_host.ndarray.sparse`)."""
        from .sparse import to_stype  # (sparse imports the NDArray package)

        return to_stype(self, stype)


for _method, _op in FLUENT_OPERATORS.items():
    if not hasattr(NDArrayMethods, _method):
        setattr(NDArrayMethods, _method, _fluent(_op))


def host_functions() -> dict[str, Any]:
    """mx.nd.<name>(array, ..., out=None) for every host operator."""
    # The package imports this mixin: its array functions are reached at call time.
    from .. import ndarray

    def make(op_name: str) -> Any:
        def run(*args: Any, out: Any = None, name: str | None = None, **kwargs: Any) -> Any:
            if not args or not isinstance(args[0], ndarray.NDArray):
                raise OperatorError(f"{op_name}: the first argument must be an NDArray")
            inputs, attrs = split_arguments(op_name, ndarray.NDArray, args[0], args[1:], kwargs)
            return run_on_host(op_name, inputs, attrs, out)

        run.__name__ = op_name
        run.__doc__ = HOST_OPS[op_name].doc
        return run

    return {op_name: make(op_name) for op_name in HOST_OPS}
