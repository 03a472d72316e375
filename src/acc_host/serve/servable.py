"""A model made ready to serve: an MXNet checkpoint or an ONNX file, its
inputs and outputs (names, dtypes, shapes with a free batch axis 0), and
``infer`` on an accelerator device, with the request checked first.

Nothing here imports a server: the KServe model (acc_host.serve.model) and
the Ray Serve replica (acc_host.serve.ray) both wrap a :class:`Servable`.
An executor is bound per set of input shapes (each batch size a request
brings) and kept, the last :data:`EXECUTORS_KEPT` of them. When the plugin
runs isolated (docs/isolation.md) and its process dies, ``infer`` raises
:class:`PluginFailure` for that request and loads the library again in a new
process, so that the next request runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AccHostError, InvalidArgumentError, IsolationError, ModelFileNotFoundError

__all__ = ["TensorInfo", "Servable", "BadRequestError", "UnknownInputError", "PluginFailure",
           "load_servable", "model_name", "check_request", "EXECUTORS_KEPT"]

#: Executors kept per model (one per set of input shapes, least recently used dropped).
EXECUTORS_KEPT = 16

#: The plugin's stats are asked at most this often (seconds).
STATS_INTERVAL = 0.25

Shape = tuple[int, ...]


class BadRequestError(InvalidArgumentError):
    """A request the model cannot run: a missing or unknown input, a wrong
    dtype or shape. The servers answer it with the protocol's 400 /
    INVALID_ARGUMENT."""


class UnknownInputError(BadRequestError, KeyError):
    """A request names an input the model does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class PluginFailure(AccHostError, RuntimeError):
    """The accelerator failed while running a request (a plugin error, or
    its isolated process died); the servers answer it with the protocol's
    server error. ``recovered`` says whether the library was loaded again."""

    def __init__(self, message: str, recovered: bool = False) -> None:
        super().__init__(message)
        self.recovered = recovered


@dataclass(frozen=True)
class TensorInfo:
    """An input or output: its name, numpy dtype and shape (-1: any extent;
    axis 0 is the batch)."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]


def model_name(source: str) -> str:
    """The name a model is served under when none is given: an ONNX file's
    stem, a checkpoint prefix's base name, or its folder's for the prefix
    ``FOLDER/model``."""
    path = Path(source)
    if source.endswith(".onnx"):
        return path.stem
    if source.endswith("-symbol.json"):
        path = Path(source[:-len("-symbol.json")])
    if path.is_dir():
        return path.name
    return path.parent.name if path.name == "model" and path.parent.name else path.name


def _checkpoint_prefix(source: str, epoch: int) -> str:
    prefix = source[:-len("-symbol.json")] if source.endswith("-symbol.json") else source
    if os.path.isdir(prefix) and os.path.isfile(os.path.join(prefix, "model-symbol.json")):
        prefix = os.path.join(prefix, "model")
    return prefix


class Servable:
    """One model bound on one context. ``inputs`` and ``outputs`` describe it;
    ``infer(arrays)`` checks a request and runs it. Thread-safe: requests run
    one at a time (a device runs one model's forwards in order anyway)."""

    def __init__(self, name: str, source: str, ctx: Any, *, epoch: int = 0,
                 shapes: Mapping[str, Sequence[int]] | None = None, strict: bool = True) -> None:
        self.name = name
        self.source = source
        self.ctx = ctx
        self.kind = "onnx" if source.endswith(".onnx") else "mxnet"
        self._epoch = epoch
        self._lock = threading.Lock()
        self._stats_answered, self._stats_asked = True, -STATS_INTERVAL
        self._executors: OrderedDict[tuple[Shape, ...], Any] = OrderedDict()
        self._load(dict(shapes or {}), strict)
        #: requests run, and the batch sizes (axis 0 of the first input) they had
        self.requests = 0

    # ---- loading ----------------------------------------------------------------------------

    def _load(self, shapes: dict[str, Sequence[int]], strict: bool) -> None:
        from ..model import load_checkpoint

        if self.kind == "onnx":
            from ..onnx.importer import import_graph

            if not os.path.isfile(self.source):
                raise ModelFileNotFoundError(f"model {self.name!r}: {self.source} not found",
                                             self.source)
            imported = import_graph(self.source)
            self._declared_outputs = list(imported.outputs)
            self._data_names = list(imported.inputs)
            declared = {name: imported.input_shapes.get(name) for name in self._data_names}
            self._dtypes = {name: np.dtype(imported.input_dtypes.get(name) or np.float32)
                            for name in self._data_names}
            self._symbol = None
            base = {name: tuple(shapes[name]) if name in shapes else declared[name]
                    for name in self._data_names}
        else:
            prefix = _checkpoint_prefix(self.source, self._epoch)
            symbol, arg_params, aux_params = load_checkpoint(prefix, self._epoch)
            self._symbol, self._arg_params, self._aux_params = symbol, arg_params, aux_params
            self._data_names = [name for name in symbol.list_arguments()
                                if name not in arg_params and not name.endswith("_label")]
            self._dtypes = {name: np.dtype(np.float32) for name in self._data_names}
            base = {name: tuple(shapes[name]) if name in shapes else None
                    for name in self._data_names}
        unknown = sorted(set(shapes) - set(self._data_names))
        if unknown and strict:
            raise InvalidArgumentError(f"model {self.name!r} has no input {unknown[0]!r} "
                                       f"(inputs: {', '.join(self._data_names)})")
        missing = [name for name, shape in base.items()
                   if shape is None or any(d is None or int(d) <= 0 for d in shape[1:])]
        if missing:
            raise InvalidArgumentError(
                f"model {self.name!r}: the shape of input {missing[0]!r} is not known; give it "
                f"(--shape {missing[0]}=1,3,224,224)")
        sample = {name: (1, *(int(d) for d in shape[1:])) for name, shape in base.items()
                  if shape is not None}
        free = -1  # axis 0: any batch
        try:
            executor, outputs = self._first_run(sample)
        except AccHostError:
            # a graph whose batch is fixed inside it (a Reshape to constant
            # extents): it runs at the declared batch only
            fixed = {name: tuple(0 if d is None else int(d) for d in shape)
                     for name, shape in base.items() if shape is not None}
            if all(shape[0] > 0 for shape in fixed.values()) and fixed != sample:
                self._executors.clear()
                sample, free = fixed, 0
                executor, outputs = self._first_run(sample)
            else:
                raise
        self.inputs = [TensorInfo(name, self._dtypes[name],
                                  (free or sample[name][0], *sample[name][1:]))
                       for name in self._data_names]
        self._output_names = self._output_names_of(executor, len(outputs))
        self.outputs = [TensorInfo(name, value.dtype, (free or value.shape[0], *value.shape[1:]))
                        for name, value in zip(self._output_names, outputs)]

    @property
    def batch_free(self) -> bool:
        """Whether axis 0 takes any batch (False: the model's graph fixes it)."""
        return all(info.shape[0] == -1 for info in self.inputs)

    def _first_run(self, sample: Mapping[str, Shape]) -> tuple[Any, list[np.ndarray]]:
        executor = self._executor(sample)
        return executor, executor.predict(**{name: np.zeros(shape, self._dtypes[name])
                                             for name, shape in sample.items()})

    def _output_names_of(self, executor: Any, count: int) -> list[str]:
        names = (list(self._declared_outputs) if self.kind == "onnx"
                 else list(getattr(executor, "output_dict", None) or ()))
        if len(names) != count:
            names = [f"output_{k}" for k in range(count)]
        return names

    def _executor(self, shapes: Mapping[str, Shape]) -> Any:
        key = tuple(shapes[name] for name in self._data_names)
        executor = self._executors.get(key)
        if executor is not None:
            self._executors.move_to_end(key)
            return executor
        executor = self._bind(shapes)
        self._executors[key] = executor
        while len(self._executors) > EXECUTORS_KEPT:
            _, dropped = self._executors.popitem(last=False)
            dropped.close()
        return executor

    def _bind(self, shapes: Mapping[str, Shape]) -> Any:
        from .. import ndarray as nd

        if self.kind == "onnx":
            from ..onnx import import_model

            symbol, arg_params, aux_params = import_model(self.source, dict(shapes))
        else:
            symbol, arg_params, aux_params = self._symbol, self._arg_params, self._aux_params
        args = {}
        inferred = dict(zip(symbol.list_arguments(),
                            symbol.infer_shape_partial(**shapes)[0]))
        for name in symbol.list_arguments():
            if name in arg_params:
                value = arg_params[name]
                args[name] = value.as_in_context(_home(self.ctx, value.dtype))
            else:
                dtype = self._dtypes.get(name, np.dtype(np.float32))
                shape = shapes.get(name) or tuple(inferred[name] or ())
                args[name] = nd.zeros(shape, _home(self.ctx, dtype), dtype)
        aux = {name: aux_params[name].as_in_context(_home(self.ctx, aux_params[name].dtype))
               for name in symbol.list_auxiliary_states()}
        return symbol.bind(self.ctx, args, aux_states=aux, data_names=list(self._data_names))

    # ---- requests ---------------------------------------------------------------------------

    def check(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The request's arrays, checked (see :func:`check_request`)."""
        return check_request(self.name, self.inputs, arrays)

    def infer(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs by name for a checked request (see :meth:`check`)."""
        checked = self.check(arrays)
        with self._lock:
            try:
                executor = self._executor({name: value.shape for name, value in checked.items()})
                outputs = executor.predict(**checked)
            except IsolationError as error:
                raise PluginFailure(f"model {self.name!r}: {error}",
                                    recovered=self._recover()) from error
            except BadRequestError:
                raise
            except AccHostError as error:
                raise PluginFailure(f"model {self.name!r}: {type(error).__name__}: {error}"
                                    ) from error
            self.requests += 1
        return dict(zip(self._output_names, outputs))

    def _recover(self) -> bool:
        """Loads the isolated library again (a new process) and drops the
        executors bound on the dead one. True when it loaded."""
        from ..context import Context
        from ..plugins.registry import get_library, load_acc

        for executor in self._executors.values():
            try:
                executor.close()
            except AccHostError:
                pass
        self._executors.clear()
        library = get_library(self.ctx.device_type)
        try:
            load_acc(library.path, acc_name=library.name, isolate=True)
        except AccHostError:
            return False
        # a context keeps the library it was made on: a new one reaches the new process
        self.ctx = Context(self.ctx.device_type, self.ctx.device_id)
        return True

    def device_stats(self) -> dict[str, float]:
        """The plugin's numeric statistics of this device (configure
        query="stats", where the plugin answers it; else empty)."""
        now = time.monotonic()
        if not self._stats_answered or not getattr(self.ctx, "is_accelerator", False) \
                or now - self._stats_asked < STATS_INTERVAL:
            return {}
        self._stats_asked = now
        try:
            answer = self.ctx.configure(query="stats")
        except AccHostError:
            self._stats_answered = False  # the plugin has no such query: never ask again
            return {}
        stats: dict[str, float] = {}
        for key, value in answer.items():
            try:
                stats[key] = float(value)
            except (TypeError, ValueError):
                continue
        return stats

    def close(self) -> None:
        with self._lock:
            for executor in self._executors.values():
                executor.close()
            self._executors.clear()


def _home(ctx: Any, dtype: Any) -> Any:
    """Where an array of dtype lives: on ctx, or on the host when the ABI
    cannot describe the dtype (the CPU operators reading it run there)."""
    from ..abi.tensor import dtype_code
    from ..context import cpu
    from ..errors import TensorError

    if not getattr(ctx, "is_accelerator", False):
        return ctx
    try:
        dtype_code(dtype)
    except TensorError:
        return cpu()
    return ctx


def context_of(acc: str, device: int) -> Any:
    """The context of device on the accelerator acc (a loaded accelerator's
    name, "cpu" for the host path, or a library's path, loaded here)."""
    from ..context import Context, cpu
    from ..plugins.registry import get_library, load_acc

    if acc.lower() == "cpu":
        return cpu()
    if os.sep in acc or acc.endswith((".so", ".dylib")):
        library = get_library(load_acc(acc).device_type)
    else:
        library = get_library(acc)
    if not 0 <= device < library.num_devices:
        raise InvalidArgumentError(f"{library.name} has {library.num_devices} device(s); device "
                                   f"{device} does not exist")
    return Context(library.name, device)


def load_servable(source: str, acc: str = "cpu", device: int = 0, *, name: str | None = None,
                  epoch: int = 0, shapes: Mapping[str, Sequence[int]] | None = None,
                  strict: bool = True) -> Servable:
    """A :class:`Servable` of source (an MXNet checkpoint prefix or an .onnx
    file) on device of accelerator acc; shapes gives inputs' shapes (axis 0
    is free), by name: one the model does not have is an error when strict."""
    return Servable(name or model_name(source), source, context_of(acc, device), epoch=epoch,
                    shapes=shapes, strict=strict)


def check_request(model: str, inputs: Sequence[TensorInfo],
                  arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The request's arrays, checked against the model's inputs: every
    input given once, no other, each of the input's dtype and rank, with the
    model's extents past axis 0 and one batch size for all (BadRequestError,
    UnknownInputError otherwise)."""
    known = {info.name: info for info in inputs}
    for name in arrays:
        if name not in known:
            raise UnknownInputError(f"model {model!r} has no input {name!r} (inputs: "
                                    f"{', '.join(known)})")
    checked: dict[str, np.ndarray] = {}
    batch: int | None = None
    for info in inputs:
        if info.name not in arrays:
            raise BadRequestError(f"model {model!r}: input {info.name!r} is missing")
        array = arrays[info.name]
        if array.dtype != info.dtype:
            raise BadRequestError(f"model {model!r}: input {info.name!r} has dtype "
                                  f"{array.dtype}, the model takes {info.dtype}")
        if len(array.shape) != len(info.shape) or any(
                want not in (-1, got) for want, got in zip(info.shape, array.shape)):
            raise BadRequestError(
                f"model {model!r}: input {info.name!r} has shape {list(array.shape)}, "
                f"the model takes {list(info.shape)} (-1: any)")
        if array.shape[0] < 1 or (batch is not None and array.shape[0] != batch):
            raise BadRequestError(f"model {model!r}: input {info.name!r} has batch "
                                  f"{array.shape[0]}; every input needs the same batch >= 1")
        batch = array.shape[0]
        checked[info.name] = np.ascontiguousarray(array)
    return checked
