"""Module (``mx.mod.Module``): MXNet's high-level wrapper that binds a
symbol for given data shapes, holds its parameters, and runs batches."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import metric as metric_module
from . import ndarray as nd
from .context import Context, cpu, current_context
from .errors import GraphError, InvalidArgumentError, ShapeError
from .initializer import Initializer, Uniform
from .io import DataBatch, DataDesc, NDArrayIter
from .model import load_checkpoint
from .model import load_params as _load_params_file
from .ndarray import NDArray, array
from .runtime.executor import Executor
from .symbol import Symbol

__all__ = ["Module"]

_log = logging.getLogger(__name__)


def _descs(shapes: Sequence[Any] | None) -> list[DataDesc]:
    result = []
    for item in shapes or []:
        if isinstance(item, DataDesc):
            result.append(item)
        else:
            name, shape = item[0], item[1]
            result.append(DataDesc(name, tuple(int(d) for d in shape)))
    return result


# ---- checkpoints and evaluation (MXNet 1.9's Module API), mixed into Module ----


def _one_input(executor: Executor, names: Sequence[str]) -> tuple[Executor, str, tuple[int, ...]]:
    """(executor, the name of its one data input, that argument's shape);
    the name is "" unless there is exactly one data input."""
    if len(names) != 1:
        return executor, "", ()
    return executor, names[0], executor.arg_dict[names[0]].shape


class ModuleMethods:
    """Mixed into Module; uses its bound executor and parameters."""

    # Module's state that these methods use (set by Module.__init__)
    _exec: Any
    _data_shapes: Any
    _label_shapes: Any
    _arg_params: Any
    _aux_params: Any
    _param_names: list[str]
    _aux_names: list[str]
    params_initialized: bool

    @classmethod
    def load(cls, prefix: str | Path, epoch: int, load_optimizer_states: bool = False,
             **kwargs: Any) -> Any:
        """A Module over ``prefix-symbol.json`` whose parameters come from
        ``prefix-<epoch>.params`` when it is bound (kwargs go to Module())."""
        if load_optimizer_states:
            raise InvalidArgumentError("Module.load: optimizer states are training state; "
                                       "acc-host runs inference only")
        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        module = cls(symbol, **kwargs)  # type: ignore[call-arg]
        module._arg_params = {name: value for name, value in arg_params.items()
                              if name in module._param_names}
        module._aux_params = {name: value for name, value in aux_params.items()
                              if name in module._aux_names}
        module.params_initialized = True
        return module

    def save_params(self, fname: str | Path) -> None:
        """The parameters as an MXNet .params file (``arg:``/``aux:`` names)."""
        arg_params, aux_params = self.get_params()  # type: ignore[attr-defined]
        params = {f"arg:{name}": value for name, value in arg_params.items()}
        params.update({f"aux:{name}": value for name, value in aux_params.items()})
        nd.save(fname, params)

    def load_params(self, fname: str | Path) -> None:
        arg_params, aux_params = _load_params_file(fname)
        self.set_params(arg_params, aux_params)  # type: ignore[attr-defined]

    def save_checkpoint(self, prefix: str | Path, epoch: int,
                        save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        """``prefix-symbol.json`` and ``prefix-<epoch:04d>.params``."""
        if save_optimizer_states:
            raise InvalidArgumentError("Module.save_checkpoint: acc-host has no optimizer "
                                       "states (inference only)")
        self._symbol.save(f"{prefix}-symbol.json")  # type: ignore[attr-defined]
        self.save_params(f"{prefix}-{epoch:04d}.params")

    def reshape(self, data_shapes: Sequence[Any],
                label_shapes: Sequence[Any] | None = None) -> None:
        """Rebinds for new input shapes, keeping the parameters."""
        executor = self._executor()  # type: ignore[attr-defined]
        descs = _descs(data_shapes) + (_descs(label_shapes) if label_shapes else [])
        shapes = {desc.name: tuple(desc.shape) for desc in descs
                  if desc.name in executor.arg_dict}
        self._check_parameter_shapes(executor, shapes)  # type: ignore[attr-defined]
        self._exec = executor.reshape(False, True, **shapes)
        self._data_shapes = _descs(data_shapes)
        self._label_shapes = _descs(label_shapes) if label_shapes else None

    def update_metric(self, eval_metric: Any, labels: Sequence[Any],
                      pre_sliced: bool = False) -> None:
        eval_metric.update(labels, self.get_outputs())  # type: ignore[attr-defined]

    def _forward_batches(self, eval_data: Any, num_batch: int | None,
                         reset: bool) -> Iterator[tuple[int, Any]]:
        """(batch number, batch) for the first num_batch batches of eval_data
        (all when None), each run forward before it is yielded."""
        if reset:
            eval_data.reset()
        for number, batch in enumerate(eval_data):
            if num_batch is not None and number == num_batch:
                break
            self.forward(batch, is_train=False)  # type: ignore[attr-defined]
            yield number, batch

    def iter_predict(self, eval_data: Any, num_batch: int | None = None,
                     reset: bool = True, sparse_row_id_fn: Any = None
                     ) -> Iterator[tuple[list[Any], int, Any]]:
        """(outputs with the padding removed, batch number, batch) per batch."""
        for number, batch in self._forward_batches(eval_data, num_batch, reset):
            keep = batch.data[0].shape[0] - (batch.pad or 0)
            yield ([output[:keep] for output in self.get_outputs()],  # type: ignore[attr-defined]
                   number, batch)

    def score(self, eval_data: Any, eval_metric: Any, num_batch: int | None = None,
              batch_end_callback: Any = None, score_end_callback: Any = None,
              reset: bool = True, epoch: int = 0, sparse_row_id_fn: Any = None
              ) -> list[tuple[str, float]]:
        """Runs eval_data through the module, updating eval_metric (a metric
        or its name) with each batch's labels; returns its name-value pairs.
        As in MXNet, the padding examples of a last batch are scored too."""
        if not isinstance(eval_metric, metric_module.EvalMetric):
            eval_metric = metric_module.create(eval_metric)
        eval_metric.reset()
        for _, batch in self._forward_batches(eval_data, num_batch, reset):
            # as MXNet: a padded last batch is scored whole, padding included
            self.update_metric(eval_metric, list(batch.label or []))
        return eval_metric.get_name_value()


class Module(ModuleMethods):
    """A symbol with its parameters, bound to one context."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Module:
        """Module(context=[ctx0, ctx1, ...]) is a DataParallelModule."""
        context = kwargs.get("context", args[3] if len(args) > 3 else None)
        if cls is Module and isinstance(context, (list, tuple)) and len(context) > 1:
            from .module_parallel import DataParallelModule

            return super().__new__(DataParallelModule)
        return super().__new__(cls)

    def __init__(self, symbol: Symbol, data_names: Sequence[str] = ("data",),
                 label_names: Sequence[str] | None = ("softmax_label",),
                 context: Context | Sequence[Context] | None = None, logger: Any = _log,
                 fixed_param_names: Sequence[str] | None = None,
                 state_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        if isinstance(context, (list, tuple)):
            if len(context) != 1:
                raise InvalidArgumentError(f"Module: {len(context)} contexts given; give one, "
                                           "or several for data parallelism")
            context = context[0]
        self._symbol = symbol
        self._context: Context = context if isinstance(context, Context) else cpu()
        arguments = symbol.list_arguments()
        self._data_names = list(data_names)
        missing = [name for name in self._data_names if name not in arguments]
        if missing:
            raise GraphError(f"Module: data names {missing} are not arguments of the symbol "
                             f"({', '.join(arguments)})")
        self._label_names = [name for name in (label_names or []) if name in arguments]
        inputs = set(self._data_names) | set(self._label_names)
        self._param_names = [name for name in arguments if name not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self._data_shapes: list[DataDesc] = []
        self._label_shapes: list[DataDesc] | None = None
        self._exec: Executor | None = None
        # (executor, its one data input's name, its bound shape) for
        # forward()'s one-batch case ("" where there is not one data input)
        self._one_input: tuple[Executor, str, tuple[int, ...]] | None = None
        self.params_initialized = False
        self._arg_params: dict[str, NDArray] | None = None
        self._aux_params: dict[str, NDArray] | None = None

    # ---- descriptions ---------------------------------------------------------------

    @property
    def symbol(self) -> Symbol:
        return self._symbol

    @property
    def data_names(self) -> list[str]:
        return list(self._data_names)

    @property
    def label_names(self) -> list[str]:
        return list(self._label_names)

    @property
    def output_names(self) -> list[str]:
        return list(self._output_names)

    @property
    def data_shapes(self) -> list[DataDesc]:
        return list(self._data_shapes)

    @property
    def label_shapes(self) -> list[DataDesc] | None:
        return self._label_shapes

    @property
    def output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        executor = self._executor()
        return [(name, output.shape) for name, output in zip(self._output_names,
                                                             executor.outputs)]

    @property
    def binded(self) -> bool:
        return self._exec is not None

    @property
    def executor(self) -> Executor:
        """The executor bind() made (acc-host's addition to MXNet's Module):
        its placement(), partition and plan tell where each operator runs.
        GraphError before bind()."""
        return self._executor()

    def _executor(self) -> Executor:
        if self._exec is None:
            raise GraphError("Module: call bind() first")
        return self._exec

    # ---- binding and parameters -----------------------------------------------------------

    def bind(self, data_shapes: Sequence[Any], label_shapes: Sequence[Any] | None = None,
             for_training: bool = True, inputs_need_grad: bool = False,
             force_rebind: bool = False, shared_module: Module | None = None,
             grad_req: str = "write") -> None:
        """Binds for these input shapes (inference only: for_training is
        accepted and ignored, no gradients are kept)."""
        if self._exec is not None and not force_rebind:
            _log.warning("Module is already bound; pass force_rebind=True to bind again")
            return
        self._data_shapes = _descs(data_shapes)
        self._label_shapes = _descs(label_shapes) if label_shapes else None
        names = [desc.name for desc in self._data_shapes]
        if sorted(names) != sorted(self._data_names):
            raise GraphError(f"Module.bind: data_shapes name {names}, the module's data names "
                             f"are {self._data_names}")
        shapes = {desc.name: desc.shape for desc in self._data_shapes}
        shapes.update({desc.name: desc.shape for desc in self._label_shapes or []
                       if desc.name in self._label_names})
        # Like MXNet's Module, the descriptions' dtypes (float32 unless given)
        # type the inputs.
        types = {desc.name: desc.dtype for desc in self._data_shapes}
        types.update({desc.name: desc.dtype for desc in self._label_shapes or []
                      if desc.name in self._label_names})
        self._exec = Executor.simple_bind(self._symbol, self._context, shapes, types)
        if self.params_initialized:
            self._copy_params_in()

    def init_params(self, initializer: Initializer | None = None,
                    arg_params: Mapping[str, NDArray] | None = None,
                    aux_params: Mapping[str, NDArray] | None = None,
                    allow_missing: bool = False, force_init: bool = False,
                    allow_extra: bool = False) -> None:
        """Takes parameters from arg_params/aux_params; those missing are
        filled by initializer when allow_missing (else an error)."""
        if self.params_initialized and not force_init:
            return
        executor = self._executor()
        initializer = initializer or Uniform(0.01)
        given_args, given_aux = dict(arg_params or {}), dict(aux_params or {})
        if not allow_extra:
            extra = sorted((set(given_args) - set(self._param_names))
                           | (set(given_aux) - set(self._aux_names)))
            if extra:
                raise GraphError(f"Module: parameters {extra} are not in the symbol; pass "
                                 "allow_extra=True to ignore them")
        for names, given, targets in ((self._param_names, given_args, executor.arg_dict),
                                      (self._aux_names, given_aux, executor.aux_dict)):
            for name in names:
                target = targets[name]
                if name in given:
                    value = given[name]
                    source = value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)
                    if source.shape != target.shape:
                        raise GraphError(f"Module: parameter {name!r} has shape {source.shape}, "
                                         f"the symbol needs {target.shape}")
                    target[:] = source
                elif allow_missing or arg_params is None and aux_params is None:
                    initializer(name, target)
                else:
                    raise GraphError(f"Module: parameter {name!r} is missing; pass "
                                     "allow_missing=True to initialize it")
        self.params_initialized = True
        self._arg_params = {name: executor.arg_dict[name] for name in self._param_names}
        self._aux_params = {name: executor.aux_dict[name] for name in self._aux_names}

    def set_params(self, arg_params: Mapping[str, NDArray], aux_params: Mapping[str, NDArray],
                   allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        self.init_params(None, arg_params, aux_params or {}, allow_missing, force_init,
                         allow_extra)

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        if not self.params_initialized:
            raise GraphError("Module: parameters are not initialized")
        executor = self._executor()
        return ({name: executor.arg_dict[name].copy() for name in self._param_names},
                {name: executor.aux_dict[name].copy() for name in self._aux_names})

    def _copy_params_in(self) -> None:
        executor = self._executor()
        for source, targets in ((self._arg_params, executor.arg_dict),
                                (self._aux_params, executor.aux_dict)):
            for name, value in (source or {}).items():
                if targets[name] is not value:
                    targets[name][:] = value.asnumpy()

    # ---- running ----------------------------------------------------------------------------

    def forward(self, data_batch: DataBatch, is_train: bool | None = None) -> None:
        """Runs one batch; rebinds first when its shapes differ from the
        bound ones (a new batch size, say)."""
        executor = self._exec
        if executor is not None and self.params_initialized:
            # One data array of the bound shape and no labels (inference):
            # straight to the executor's forward, which checks the value.
            data = data_batch.data
            if len(data) == 1 and getattr(data_batch, "label", None) is None:
                one = self._one_input
                if one is None or one[0] is not executor:
                    one = self._one_input = _one_input(executor, self._data_names)
                value = data[0]
                if one[1] and value.shape == one[2]:
                    executor.forward(bool(is_train), **{one[1]: value})
                    return
        if executor is None:
            executor = self._executor()  # raises: not bound
        if not self.params_initialized:
            raise GraphError("Module: call set_params() or init_params() before forward()")
        data, names = data_batch.data, self._data_names
        if len(data) != len(names):
            raise GraphError(f"Module.forward: {len(data)} data arrays for data names "
                             f"{names}")
        arg_dict = executor.arg_dict
        inputs = {}
        for name, value in zip(names, data):
            if arg_dict[name].shape != tuple(value.shape):  # a batch of another shape
                shapes = {name: tuple(value.shape) for name, value in zip(names, data)}
                self._check_parameter_shapes(executor, shapes)
                self._exec = executor = executor.reshape(False, True, **shapes)
                self._data_shapes = [DataDesc(name, shape) for name, shape in shapes.items()]
                inputs = dict(zip(names, data))
                break
            inputs[name] = value
        labels = getattr(data_batch, "label", None)  # the proposal's Batch has only data
        if labels is not None:
            inputs.update(zip(self._label_names, labels))
        executor.forward(bool(is_train), **inputs)

    def _check_parameter_shapes(self, executor: Executor,
                                shapes: Mapping[str, tuple[int, ...]]) -> None:
        """Refuses a batch whose data shapes would need parameters of other
        shapes (rebinding would replace them with new, zero arrays): only
        the data and labels may change with a new batch."""
        arg_shapes, _, aux_shapes = self._symbol.infer_shape_partial(**shapes)
        for names, new_shapes, arrays in (
                (self._symbol.list_arguments(), arg_shapes, executor.arg_dict),
                (self._aux_names, aux_shapes, executor.aux_dict)):
            for name, shape in zip(names, new_shapes):
                if (name in arrays and (name in self._param_names or name in self._aux_names)
                        and shape is not None and tuple(shape) != arrays[name].shape):
                    raise ShapeError(
                        f"Module.forward: data of shape {dict(shapes)} needs parameter "
                        f"{name!r} of shape {tuple(shape)}, the module's has shape "
                        f"{arrays[name].shape}")

    def get_outputs(self, merge_multi_context: bool = True) -> list[NDArray]:
        return list(self._executor().outputs)

    def _one_batch(self, values: np.ndarray | NDArray, num_batch: int | None
                   ) -> list[NDArray] | None:
        """predict()'s outputs for data that is exactly one batch of the
        bound shape (what NDArrayIter would make of it: one batch, no
        padding), run as one synchronous inference of the executor; None
        for any other data, and before the parameters are set."""
        executor = self._exec
        if executor is None or not self.params_initialized or num_batch == 0:
            return None
        one = self._one_input
        if one is None or one[0] is not executor:
            one = self._one_input = _one_input(executor, self._data_names)
        if not one[1] or tuple(values.shape) != one[2]:
            return None
        outputs = executor._predict({one[1]: values})
        # New arrays: taken over, not copied (array() would copy them).
        ctx = current_context()
        return [NDArray(output, ctx) for output in outputs]

    def predict(self, eval_data: Any, num_batch: int | None = None, merge_batches: bool = True,
                reset: bool = True, always_output_list: bool = False) -> Any:
        """Outputs over all batches of eval_data (an iterator, or arrays that
        are batched by the bound batch size), padding removed."""
        if isinstance(eval_data, (np.ndarray, NDArray)):
            one = self._one_batch(eval_data, num_batch) if merge_batches else None
            if one is not None:  # exactly one bound batch: the executor's predict
                return one[0] if len(one) == 1 and not always_output_list else one
            batch_size = self._data_shapes[0].shape[0] if self._data_shapes else 1
            eval_data = NDArrayIter(eval_data, batch_size=batch_size)
        if reset and hasattr(eval_data, "reset"):
            eval_data.reset()
        collected: list[list[np.ndarray]] = []
        for count, batch in enumerate(eval_data):
            if num_batch is not None and count == num_batch:
                break
            self.forward(batch, is_train=False)
            keep = batch.data[0].shape[0] - batch.pad
            collected.append([output.asnumpy()[:keep] for output in self.get_outputs()])
        if not merge_batches:
            return [[array(values) for values in batch] for batch in collected]
        merged = [array(np.concatenate([batch[k] for batch in collected]))
                  for k in range(len(collected[0]))] if collected else []
        return merged[0] if len(merged) == 1 and not always_output_list else merged
