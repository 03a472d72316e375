"""An ONNX backend (``onnx.backend.base.Backend``) running on acc-host.

``prepare(model, device="CPU", accelerator=None)`` imports the model with
:func:`acc_host.onnx.import_model` and binds it; ``accelerator`` selects
where it runs: None or "cpu" (the host CPU path), an accelerator name
("cpu_ref", "cpu_ref:1"), a library path (loaded with ``mx.load_acc``), or
an ``mx.Context``. Every result is computed by acc-host's operators (and
plugins). The model is read by acc_host.onnx.reader: preparing a model
from a file does not import the onnx package. The classes have the
interface of ``onnx.backend.base``'s Backend and BackendRep (what onnx's
backend test runner calls) without deriving from them, for that reason.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import ndarray as nd
from ..abi.tensor import dtype_code
from ..context import Context, cpu
from ..errors import InvalidArgumentError, TensorError, UnsupportedOnnxOperatorError
from ..plugins.registry import load_acc
from ..runtime.plan_cache import PlanCache
from ._onnx import require_onnx
from .importer import Imported, _load, _tensor_type, import_graph


def resolve_context(accelerator: Any) -> Context:
    """A Context from None/"cpu", a name ("cpu_ref", "cpu_ref:1"), a library
    path or a Context."""
    if accelerator is None:
        return cpu()
    if isinstance(accelerator, Context):
        return accelerator
    text = str(accelerator)
    if os.sep in text or text.endswith((".so", ".dylib")):
        return load_acc(text)
    name, _, device = text.partition(":")
    if name.lower() == "cpu":
        return cpu()
    return Context(name, int(device or 0))


class AccHostRep:
    """A prepared model: the imported graph, imported once, and its
    executors bound on its context by input names, shapes and dtypes in a
    PlanCache (acc_host.runtime.plan_cache: the last DEFAULT_SIZE shapes,
    LRU; ``plans.stats()``). A new shape is planned again (its shape
    arithmetic worked out from the shapes, see docs/dynamic_shapes.md); it
    is never imported again.

    A model that cannot be imported ahead of time because an attribute-like
    input the host operators need as a constant (ReduceX's axes, a Range of
    a dtype the host has no operator for, ...) is data is specialised at run
    time: imported again with those inputs' values frozen as constants (one
    specialisation per set of values, cached). ``imports`` counts the
    imports made."""

    def __init__(self, model: Any, ctx: Context) -> None:
        self.model = model
        self.ctx = ctx
        initializers = {init.name for init in model.graph.initializer}
        self._initialized = initializers
        self.input_names = [value.name for value in model.graph.input
                            if value.name not in initializers]
        self._specialised: dict[tuple, tuple[Any, Any]] = {}
        # Each weight in its home context, once: the executors of every shape
        # bind the same arrays, so a subgraph that is the same at two shapes
        # shares its loaded model (acc_host.runtime.shared_models).
        self._homed: dict[int, tuple[Any, Any]] = {}
        self.plans = PlanCache(self._bind_key)
        self.imports = 0
        # Each input's declared element type, for inputs given as lists.
        self._declared: dict[str, np.dtype] = {}
        for value in model.graph.input:
            dtype = _tensor_type(value)[1] if value.name in self.input_names else None
            if dtype is not None and dtype.kind not in "OSU":  # strings: numpy picks
                self._declared[value.name] = dtype
        self._executor: Any = None
        self._key: tuple | None = None
        # Whether a dict of arrays fitting _key can go to _executor as it is
        # (see run): the key's names are the inputs, all bound arguments.
        self._plain = False
        self.imported: Imported | None
        try:
            self.imports += 1
            self.imported = import_graph(model)
        except UnsupportedOnnxOperatorError as error:
            if not _only_dynamic(error):
                raise
            self.imported = None  # specialised at run time
            return
        shapes = {name: self.imported.input_shapes.get(name) for name in self.imported.inputs}
        if all(shape is not None and all(d >= 0 for d in shape) for shape in shapes.values()):
            declared = {name: tuple(shape) for name, shape in shapes.items() if shape is not None}
            dtypes = dict(self.imported.input_dtypes)
            key = tuple((name, declared[name], np.dtype(dtypes[name]))
                        for name in self.imported.inputs)
            self._remember(self.plans.get(key), key)

    @property
    def executor(self) -> Any:
        """The executor bound for the latest inputs' shapes and dtypes (None
        until one is: a model whose shapes are known only from its inputs
        binds at its first run): its placement(), partition and plan tell
        where each operator runs."""
        return self._executor

    def _remember(self, executor: Any, key: tuple) -> None:
        """Keeps executor as the one bound for key's (name, shape, dtype)s."""
        self._executor, self._key = executor, key
        names = {name for name, _, _ in key}
        self._plain = names == set(self.input_names) and names <= executor.arg_dict.keys()

    def _bind_key(self, key: tuple) -> Any:
        """The executor of the imported graph for key's (name, shape, dtype)s."""
        assert self.imported is not None
        return self._bind(self.imported, {name: shape for name, shape, _ in key},
                          {name: dtype for name, _, dtype in key})

    def _home(self, dtype: Any) -> Context:
        """The context of an input array: the executor's, unless the accelerator
        cannot hold that dtype (the ABI has no TensorDType for bool, 16-bit or
        unsigned wider integers): those stay on the host, where the CPU
        operators that read them run."""
        if not self.ctx.is_accelerator:
            return self.ctx
        try:
            dtype_code(dtype)
        except TensorError:
            return cpu()
        return self.ctx

    def _homed_weight(self, value: Any) -> Any:
        """value where the executors read it: a weight stays in host memory
        (loadModel reads a subgraph's weights from there; a copy in the
        accelerator's memory first would be one more pass over every weight
        at prepare, and a second copy held), one array per weight for every
        shape's executor."""
        held = self._homed.get(id(value))
        if held is None or held[0] is not value:
            held = self._homed[id(value)] = (value, value)
        return held[1]

    def _bind(self, imported: Any, shapes: dict[str, tuple], dtypes: dict[str, Any]) -> Any:
        symbol = imported.symbol
        args = {}
        for name in symbol.list_arguments():
            if name in imported.arg_params:
                args[name] = self._homed_weight(imported.arg_params[name])
            else:
                args[name] = nd.zeros(shapes[name], self._home(dtypes[name]), dtypes[name])
        aux = {}
        for name in symbol.list_auxiliary_states():
            if name in imported.aux_params:
                aux[name] = self._homed_weight(imported.aux_params[name])
            else:
                aux[name] = nd.zeros(shapes[name], self._home(dtypes[name]), dtypes[name])
        return symbol.bind(self.ctx, args, aux_states=aux,
                           data_names=[name for name in imported.inputs if name in args])

    def _feed(self, inputs: Any) -> dict[str, np.ndarray]:
        """The inputs by name: numpy arrays as they are, anything else (a
        list, a scalar) as an array of the input's declared dtype when the
        model declares one (as onnxruntime reads them)."""
        names = self.input_names
        if isinstance(inputs, dict):
            shadowed = sorted(set(inputs) & self._initialized)
            if shadowed:
                raise InvalidArgumentError(
                    f"{', '.join(map(repr, shadowed))}: graph input(s) with an initializer, "
                    "whose value the model fixes (acc-host folds initializers at import and "
                    "does not override them); feed only " + (", ".join(map(repr, names))
                                                             or "nothing"))
            missing = [name for name in names if name not in inputs]
            unknown = sorted(set(inputs) - set(names))
            if missing or unknown:
                raise InvalidArgumentError(
                    f"the model's inputs are {', '.join(map(repr, names)) or 'none'}; missing: "
                    f"{', '.join(map(repr, missing)) or 'none'}; unknown: "
                    f"{', '.join(map(repr, unknown)) or 'none'}")
            values = [inputs[name] for name in names]
        else:
            values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(values) != len(names):
                fixed = sorted(self._initialized & {value.name for value in
                                                    self.model.graph.input})
                note = (f"; {', '.join(map(repr, fixed))} also listed as graph input(s) "
                        "have an initializer, which fixes their value") if fixed else ""
                raise InvalidArgumentError(
                    f"the model takes {len(names)} inputs ({', '.join(names)}), "
                    f"{len(values)} given{note}")
        feed = {}
        for name, value in zip(names, values):  # per inference: arrays as they are
            if type(value) is not np.ndarray:
                value = np.asarray(value, self._declared.get(name))
            feed[name] = value
        return feed

    def _specialise(self, feed: dict[str, np.ndarray]) -> tuple[Any, Any]:
        shapes = {name: value.shape for name, value in feed.items()}
        frozen: dict[str, np.ndarray] = {}
        while True:
            key = (tuple((n, v.shape, v.dtype.str) for n, v in feed.items()),
                   tuple((n, v.tobytes()) for n, v in sorted(frozen.items())))
            if key in self._specialised:
                return self._specialised[key]
            try:
                self.imports += 1
                imported = import_graph(self.model, shapes=shapes, frozen=frozen)
                break
            except UnsupportedOnnxOperatorError as error:
                new = [name for name in error.dynamic_inputs
                       if name in feed and name not in frozen]
                if not new or not _only_dynamic(error):
                    raise
                frozen.update({name: feed[name] for name in new})
        executor = self._bind(imported, shapes, {n: v.dtype for n, v in feed.items()})
        self._specialised[key] = (imported, executor)
        return imported, executor

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        executor, key = self._executor, self._key
        if self._plain and key is not None:
            # A list or tuple of numpy arrays exactly as bound, in order: the
            # executor's direct path checks them itself.
            names = self.input_names
            if type(inputs) is list and len(inputs) == 1 and len(names) == 1:
                results = executor._predict_exact({names[0]: inputs[0]})
                if results is not None:
                    return tuple(results)
            # A dict holding exactly the bound executor's inputs goes to it
            # as it is, a list or tuple of them in order as a dict (what
            # _feed and the checks below would make of them).
            kind = type(inputs)
            if kind is dict:
                if _fits(inputs, key):
                    return tuple(executor._predict(inputs))
            elif (kind is list or kind is tuple) and len(inputs) == len(key):
                named = dict(zip(self.input_names, inputs))
                if _fits(named, key):
                    return tuple(executor._predict(named))
        feed = self._feed(inputs)
        if self.imported is None:
            _, executor = self._specialise(feed)
        else:
            # The executor bound for these names, shapes and dtypes, else
            # one bound now (and kept).
            if key is None or not _fits(feed, key):
                executor = None
            if executor is None:
                key = tuple((n, v.shape, v.dtype) for n, v in feed.items())
                executor = self.plans.get(key)
                self._remember(executor, key)
        arg_dict, aux_dict = executor.arg_dict, executor.aux_dict
        args = feed
        for name in feed:
            if name not in arg_dict:  # rare: an auxiliary state or an unused input
                args = {name: value for name, value in feed.items() if name in arg_dict}
                for aux, value in feed.items():
                    if aux in aux_dict:
                        aux_dict[aux][:] = value
                break
        return tuple(executor._predict(args))


def _fits(values: dict[str, Any], key: tuple) -> bool:
    """Whether values holds exactly key's inputs, each a numpy array of its
    (name, shape, dtype). Per inference, so written out."""
    if len(values) != len(key):
        return False
    for name, shape, dtype in key:
        value = values.get(name)
        if type(value) is not np.ndarray or value.shape != shape or value.dtype != dtype:
            return False
    return True


def _only_dynamic(error: UnsupportedOnnxOperatorError) -> bool:
    """Whether every problem is a value that must be constant and is not."""
    dynamic = error.dynamic_inputs
    return bool(dynamic) and len(dynamic) == len(error.unsupported)


class AccHostBackend:
    """onnx.backend.base.Backend's interface over acc-host."""

    accelerator: Any = None  # default for prepare(); subclasses pick an accelerator

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return True

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> AccHostRep:
        accelerator = kwargs.pop("accelerator", cls.accelerator)
        if not cls.supports_device(device):
            raise ValueError(f"device {device!r} is not supported (CPU only)")
        return AccHostRep(_load(model), resolve_context(accelerator))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, tuple]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """One node as a model: its inputs are the node's inputs, in order."""
        onnx = require_onnx()
        from onnx import helper  # the optional onnx package (require_onnx checked it)

        values = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
        names = list(node.input)
        graph_inputs = [helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype),
            np.asarray(value).shape) for name, value in zip(names, values) if name]
        graph_outputs = [helper.make_empty_tensor_value_info(name) for name in node.output
                         if name]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(node.domain or "",
                                                                            opset)])
        feed = [np.asarray(value) for name, value in zip(names, values) if name]
        return cls.prepare(model, device, **kwargs).run(feed)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


class CpuRefBackend(AccHostBackend):
    """The same backend with the graph on the bundled cpu_ref plugin."""

    accelerator = "cpu_ref"


class MluBackend(AccHostBackend):
    """The same backend with the graph on the bundled mlu_sim plugin (the
    simulated MLU supports a subset of the operators; the rest falls back to
    the host CPU path)."""

    accelerator = "mlu"


prepare = AccHostBackend.prepare
run_model = AccHostBackend.run_model
run_node = AccHostBackend.run_node
supports_device = AccHostBackend.supports_device
