"""Module methods of MXNet 1.9's API for checkpoints and evaluation:
load, save_checkpoint, save_params, load_params, reshape, score,
update_metric and iter_predict (mixed into Module)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ModuleMethods"]


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
        from .errors import InvalidArgumentError
        from .model import load_checkpoint

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
        from . import ndarray as nd

        arg_params, aux_params = self.get_params()  # type: ignore[attr-defined]
        params = {f"arg:{name}": value for name, value in arg_params.items()}
        params.update({f"aux:{name}": value for name, value in aux_params.items()})
        nd.save(fname, params)

    def load_params(self, fname: str | Path) -> None:
        from .model import load_params

        arg_params, aux_params = load_params(fname)
        self.set_params(arg_params, aux_params)  # type: ignore[attr-defined]

    def save_checkpoint(self, prefix: str | Path, epoch: int,
                        save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        """``prefix-symbol.json`` and ``prefix-<epoch:04d>.params``."""
        from .errors import InvalidArgumentError

        if save_optimizer_states:
            raise InvalidArgumentError("Module.save_checkpoint: acc-host has no optimizer "
                                       "states (inference only)")
        self._symbol.save(f"{prefix}-symbol.json")  # type: ignore[attr-defined]
        self.save_params(f"{prefix}-{epoch:04d}.params")

    def reshape(self, data_shapes: Sequence[Any],
                label_shapes: Sequence[Any] | None = None) -> None:
        """Rebinds for new input shapes, keeping the parameters."""
        from .module import _descs

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

    def iter_predict(self, eval_data: Any, num_batch: int | None = None,
                     reset: bool = True, sparse_row_id_fn: Any = None
                     ) -> Iterator[tuple[list[Any], int, Any]]:
        """(outputs with the padding removed, batch number, batch) per batch."""
        if reset:
            eval_data.reset()
        for number, batch in enumerate(eval_data):
            if num_batch is not None and number == num_batch:
                break
            self.forward(batch, is_train=False)  # type: ignore[attr-defined]
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
        from . import metric as metric_module

        if not isinstance(eval_metric, metric_module.EvalMetric):
            eval_metric = metric_module.create(eval_metric)
        eval_metric.reset()
        if reset:
            eval_data.reset()
        for number, batch in enumerate(eval_data):
            if num_batch is not None and number == num_batch:
                break
            self.forward(batch, is_train=False)  # type: ignore[attr-defined]
            # as MXNet: a padded last batch is scored whole, padding included
            self.update_metric(eval_metric, list(batch.label or []))
        return eval_metric.get_name_value()
