"""Gluon blocks for inference: Block, HybridBlock, SymbolBlock.

Naming follows MXNet 1.x so that files and names carry over: a block's
prefix is ``<alias><n>_`` (a process-wide counter per alias at the top
level, a per-parent counter inside ``with parent.name_scope():``), its
parameters are ``prefix + name``; ``save_parameters`` writes the structural
names (``0.weight``, ``features.1.gamma``) and ``export`` the full names with
``arg:``/``aux:``, both as MXNet's .params format.

A HybridBlock runs its ``hybrid_forward`` on NDArrays (``F`` is mx.nd)
until ``hybridize()``; then, and always for a SymbolBlock, it traces the
symbol once (``F`` is mx.sym) and runs it as a bound executor on the
input's context, so on an accelerator it is partitioned like any bound
symbol.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import ndarray as nd
from .. import symbol as sym
from ..context import Context
from ..errors import GraphError, InvalidArgumentError
from .parameter import DeferredInitializationError, Parameter, ParameterDict

__all__ = ["Block", "HybridBlock", "SymbolBlock"]

_scope = threading.local()
_global_counter: dict[str, int] = {}
_counter_lock = threading.Lock()


class _BlockScope:
    """``with block.name_scope():``: children created inside are named
    under the block's prefix."""

    def __init__(self, block: Block) -> None:
        self._block = block
        self._counter: dict[str, int] = {}
        self._previous: _BlockScope | None = None

    @staticmethod
    def create(prefix: str | None, params: ParameterDict | None,
               hint: str) -> tuple[str, ParameterDict]:
        current: _BlockScope | None = getattr(_scope, "value", None)
        if current is None:
            if prefix is None:
                with _counter_lock:
                    count = _global_counter.get(hint, 0)
                    _global_counter[hint] = count + 1
                prefix = f"{hint}{count}_"
            shared = ParameterDict(prefix) if params is None else ParameterDict(params.prefix,
                                                                                params)
            return prefix, shared
        if prefix is None:
            count = current._counter.get(hint, 0)
            prefix = f"{hint}{count}_"
            current._counter[hint] = count + 1
        parent = current._block.params
        shared = (ParameterDict(parent.prefix + prefix, parent._shared) if params is None
                  else ParameterDict(params.prefix, params))
        return current._block.prefix + prefix, shared

    def __enter__(self) -> _BlockScope:
        self._previous = getattr(_scope, "value", None)
        _scope.value = self
        return self

    def __exit__(self, *exc: object) -> None:
        _scope.value = self._previous


class Block:
    """A layer or a model: parameters and child blocks, and forward()."""

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        self._empty_prefix = prefix == ""
        self._prefix, self._params = _BlockScope.create(prefix, params, self._alias())
        self._name = self._prefix[:-1] if self._prefix.endswith("_") else self._prefix
        self._scope = _BlockScope(self)
        self._children: OrderedDict[str, Block] = OrderedDict()
        self._reg_params: OrderedDict[str, Parameter] = OrderedDict()

    def _alias(self) -> str:
        return type(self).__name__.lower()

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        lines += [f"  ({key}): {child!r}".replace("\n", "\n  ")
                  for key, child in self._children.items()]
        return "\n".join(lines) + "\n)" if self._children else f"{type(self).__name__}()"

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            self._reg_params[name] = value
        super().__setattr__(name, value)

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def name(self) -> str:
        return self._name

    @property
    def params(self) -> ParameterDict:
        """The parameters of this block only (not its children's)."""
        return self._params

    def name_scope(self) -> _BlockScope:
        return self._scope

    def register_child(self, block: Block, name: str | None = None) -> None:
        self._children[name if name is not None else str(len(self._children))] = block

    def collect_params(self, select: str | None = None) -> ParameterDict:
        """This block's and its descendants' parameters by full name (those
        matching the regular expression select, if given)."""
        collected = ParameterDict(self._params.prefix)
        pattern = re.compile(select) if select else None
        for block in self._walk():
            for name, param in block._params.items():
                if pattern is None or pattern.match(name):
                    collected._params[name] = param
        return collected

    def _walk(self) -> Iterator[Block]:
        yield self
        for child in self._children.values():
            yield from child._walk()

    def _collect_params_with_prefix(self, prefix: str = "") -> OrderedDict[str, Parameter]:
        if prefix:
            prefix += "."
        collected = OrderedDict((prefix + key, value) for key, value in self._reg_params.items())
        for name, child in self._children.items():
            collected.update(child._collect_params_with_prefix(prefix + name))
        return collected

    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False,
                   force_reinit: bool = False) -> None:
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def save_parameters(self, filename: str | Path, deduplicate: bool = False) -> None:
        """MXNet's .params file with the structural names (``0.weight``)."""
        params = self._collect_params_with_prefix()
        if deduplicate:
            seen: dict[int, str] = {}
            params = OrderedDict((name, param) for name, param in params.items()
                                 if seen.setdefault(id(param), name) == name)
        nd.save(filename, {name: param.list_data()[0] for name, param in params.items()})

    def load_parameters(self, filename: str | Path, ctx: Any = None,
                        allow_missing: bool = False, ignore_extra: bool = False,
                        cast_dtype: bool = False, dtype_source: str = "current") -> None:
        """Loads a file of save_parameters (structural names), or one of
        export/ParameterDict.save (full names, with or without arg:/aux:)."""
        loaded = nd.load(filename)
        if not isinstance(loaded, dict):
            raise GraphError(f"{filename}: the file has no parameter names")
        params = self._collect_params_with_prefix()
        if loaded and not any("." in key for key in loaded) and not set(loaded) & set(params):
            # full names (export, ParameterDict.save)
            self.collect_params().load(filename, ctx, allow_missing, ignore_extra,
                                       self.prefix if self._empty_prefix else "", cast_dtype)
            return
        if not allow_missing:
            missing = [name for name in params if name not in loaded]
            if missing:
                raise GraphError(f"{filename}: parameters {missing} of the block are missing; "
                                 "pass allow_missing=True to keep their values")
        if not ignore_extra:
            extra = [name for name in loaded if name not in params]
            if extra:
                raise GraphError(f"{filename}: {extra} are not parameters of the block; pass "
                                 "ignore_extra=True to skip them")
        for name, value in loaded.items():
            if name in params:
                params[name]._load(value, ctx, cast_dtype)

    # MXNet 1.x's older names
    def save_params(self, filename: str | Path) -> None:
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_params(self, filename: str | Path, ctx: Any = None, allow_missing: bool = False,
                    ignore_extra: bool = False) -> None:
        self.collect_params().load(filename, ctx, allow_missing, ignore_extra, self.prefix)

    def cast(self, dtype: Any) -> None:
        for param in self.collect_params().values():
            param.cast(dtype)

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def summary(self, *inputs: Any) -> None:
        total = sum(int(np.prod(param.shape or (0,))) for param in self.collect_params().values())
        print(f"{type(self).__name__}: {len(self.collect_params())} parameters, "
              f"{total} values")


def _flatten(args: Sequence[Any]) -> list[Any]:
    return [item for arg in args for item in (_flatten(arg) if isinstance(arg, (list, tuple))
                                              else [arg])]


class HybridBlock(Block):
    """A block whose hybrid_forward(F, x, ..., **params) works with F = mx.nd
    and F = mx.sym."""

    def __init__(self, prefix: str | None = None, params: ParameterDict | None = None) -> None:
        super().__init__(prefix, params)
        self._active = False
        self._cached: dict[tuple[Any, ...], Any] = {}
        self._cached_symbol: tuple[list[Any], Any] | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Block) and not isinstance(value, HybridBlock):
            raise InvalidArgumentError(f"{type(self).__name__}: child {name!r} is not a "
                                       "HybridBlock; a HybridBlock's children must be")
        super().__setattr__(name, value)
        if isinstance(value, (Block, Parameter)):
            self._clear_cache()

    def _clear_cache(self) -> None:
        self.__dict__["_cached"] = {}
        self.__dict__["_cached_symbol"] = None

    def register_child(self, block: Block, name: str | None = None) -> None:
        super().register_child(block, name)
        if "_cached" in self.__dict__:
            self._clear_cache()

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        self._active = active
        self._clear_cache()
        super().hybridize(active, **kwargs)

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N803
        raise NotImplementedError(f"{type(self).__name__}.hybrid_forward")

    # ---- tracing ---------------------------------------------------------------------------

    def _symbolic_call(self, *inputs: Any) -> Any:
        """hybrid_forward on symbols (children are traced through their own
        _symbolic_call when hybrid_forward calls them with symbols)."""
        params = {key: param.var() for key, param in self._reg_params.items()}
        return self.hybrid_forward(sym, *inputs, **params)

    def _get_graph(self, count: int) -> tuple[list[Any], Any]:
        if self._cached_symbol is None:
            names = ["data"] if count == 1 else [f"data{k}" for k in range(count)]
            inputs = [sym.Variable(name) for name in names]
            out = self._symbolic_call(*inputs)
            outputs = _flatten([out]) if isinstance(out, (list, tuple)) else [out]
            self.__dict__["_cached_symbol"] = (inputs, outputs[0] if len(outputs) == 1
                                               else sym.Group(outputs))
        assert self._cached_symbol is not None
        return self._cached_symbol

    def _infer_parameter_shapes(self, args: Sequence[Any]) -> None:
        inputs, out = self._get_graph(len(args))
        shapes = {var.name: tuple(arg.shape) for var, arg in zip(inputs, args)}
        types = {var.name: arg.dtype for var, arg in zip(inputs, args)}
        arg_shapes, _, aux_shapes = out.infer_shape_partial(**shapes)
        params = {param.name: param for param in self.collect_params().values()}
        for names, found in ((out.list_arguments(), arg_shapes),
                             (out.list_auxiliary_states(), aux_shapes)):
            for name, shape in zip(names, found):
                if name in params and shape is not None and all(n > 0 for n in shape):
                    params[name].shape = shape
        del types
        for param in params.values():
            param._finish_deferred_init()

    def _deferred_pending(self) -> bool:
        return any(param._deferred is not None for param in self.collect_params().values())

    def export(self, path: str | Path, epoch: int = 0, remove_amp_cast: bool = True) -> None:
        """``path-symbol.json`` and ``path-<epoch:04d>.params`` (names
        ``arg:``/``aux:`` + full name), as MXNet's export; needs one forward
        (or known shapes) first."""
        if self._cached_symbol is None:
            raise GraphError("export: run a forward first (after hybridize()) so that the "
                             "graph is known")
        _, out = self._cached_symbol
        out.save(f"{path}-symbol.json")
        # in collect_params() order, as MXNet writes them
        arguments, aux_states = set(out.list_arguments()), set(out.list_auxiliary_states())
        arrays = {}
        for name, param in self.collect_params().items():
            if name in arguments:
                arrays[f"arg:{name}"] = param.list_data()[0]
            elif name in aux_states:
                arrays[f"aux:{name}"] = param.list_data()[0]
        nd.save(f"{path}-{epoch:04d}.params", arrays)

    # ---- running ---------------------------------------------------------------------------

    def _call_cached(self, *args: Any) -> Any:
        inputs, out = self._get_graph(len(args))
        ctx = args[0].context
        key = (ctx, tuple((tuple(arg.shape), arg.dtype.str) for arg in args))
        executor = self._cached.get(key)
        if executor is None:
            executor = _bind(out, inputs, args, ctx, self.collect_params())
            self._cached[key] = executor
        with executor.lock:
            outputs = executor.forward(**{var.name: arg for var, arg in zip(inputs, args)})
            results = [output.copy() for output in outputs]
        return results[0] if len(results) == 1 else results

    def forward(self, x: Any, *args: Any) -> Any:
        if isinstance(x, sym.Symbol):
            return self._symbolic_call(x, *args)
        arrays = [x, *args]
        if not all(isinstance(arg, nd.NDArray) for arg in arrays):
            raise InvalidArgumentError(f"{type(self).__name__}: inputs must be NDArrays (or "
                                       "Symbols)")
        if self._deferred_pending():
            self._infer_parameter_shapes(arrays)
        if self._active:
            return self._call_cached(*arrays)
        ctx = x.context
        params = {key: param.data(ctx) for key, param in self._reg_params.items()}
        with ctx:
            return self.hybrid_forward(nd, x, *args, **params)


def _bind(out: Any, inputs: Sequence[Any], args: Sequence[Any], ctx: Context,
          params: ParameterDict) -> Any:
    by_name = {param.name: param for param in params.values()}
    given = {var.name: nd.zeros(arg.shape, ctx=ctx, dtype=arg.dtype)
             for var, arg in zip(inputs, args)}
    arg_values, aux_values = {}, {}
    for name in out.list_arguments():
        if name in given:
            arg_values[name] = given[name]
        elif name in by_name:
            arg_values[name] = by_name[name].data(ctx)
        else:
            raise GraphError(f"the graph's argument {name!r} is neither an input nor a "
                             "parameter of the block")
    for name in out.list_auxiliary_states():
        if name not in by_name:
            raise GraphError(f"the graph's auxiliary state {name!r} is not a parameter")
        aux_values[name] = by_name[name].data(ctx)
    return out.bind(ctx, arg_values, aux_states=aux_values, data_names=list(given))


class SymbolBlock(HybridBlock):
    """A block over a symbol: its arguments that are not inputs (and its
    auxiliary states) are the parameters, named as in the symbol."""

    def __init__(self, outputs: Any, inputs: Any, params: ParameterDict | None = None) -> None:
        super().__init__(prefix="", params=None)
        self._prefix, self._name = "", ""
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        out = outputs[0] if len(outputs) == 1 else sym.Group(outputs)
        input_names = [var.name for var in inputs]
        arguments = out.list_arguments()
        unknown = [name for name in input_names if name not in arguments]
        if unknown:
            raise GraphError(f"SymbolBlock: inputs {unknown} are not arguments of the symbol "
                             f"({', '.join(arguments)})")
        for name in [*arguments, *out.list_auxiliary_states()]:
            if name in input_names:
                continue
            shared = params._get_impl(name) if params is not None else None
            param = shared or Parameter(name, allow_deferred_init=True)
            self._params._params[name] = param
        self.__dict__["_cached_symbol"] = (inputs, out)
        self._active = True

    def _get_graph(self, count: int) -> tuple[list[Any], Any]:
        assert self._cached_symbol is not None
        inputs, out = self._cached_symbol
        if count != len(inputs):
            raise InvalidArgumentError(f"SymbolBlock: {count} inputs given, the symbol takes "
                                       f"{len(inputs)} ({', '.join(v.name for v in inputs)})")
        return self._cached_symbol

    def _symbolic_call(self, *inputs: Any) -> Any:
        raise GraphError("SymbolBlock cannot be traced into another graph in acc-host; call "
                         "it on NDArrays")

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """A SymbolBlock always runs its symbol as a bound executor."""

    def _clear_cache(self) -> None:
        self.__dict__["_cached"] = {}

    def forward(self, x: Any, *args: Any) -> Any:
        arrays = [x, *args]
        if not all(isinstance(arg, nd.NDArray) for arg in arrays):
            raise InvalidArgumentError("SymbolBlock: inputs must be NDArrays")
        if self._deferred_pending():
            self._infer_parameter_shapes(arrays)
        for param in self.collect_params().values():
            if not param._data:
                raise DeferredInitializationError(
                    f"SymbolBlock: parameter {param.name!r} has no value; load the parameter "
                    "file or call initialize()")
        return self._call_cached(*arrays)

    @staticmethod
    def imports(symbol_file: str | Path, input_names: str | Sequence[str],
                param_file: str | Path | None = None, ctx: Any = None,
                allow_missing: bool = False, ignore_extra: bool = False) -> SymbolBlock:
        """A SymbolBlock of an exported model (``path-symbol.json`` and,
        optionally, ``path-0000.params``) on ctx."""
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        symbol = sym.load(symbol_file)
        block = SymbolBlock(symbol, [sym.Variable(name) for name in names])
        if param_file is not None:
            block.collect_params().load(param_file, ctx, allow_missing, ignore_extra,
                                        cast_dtype=True)
        return block
