"""Loading the MODEL argument of ``run`` and ``partition`` (an MXNet
checkpoint prefix or an ``.onnx`` file), its inputs (``--input``,
``--shape``, ``--batch``, or random ones with a fixed seed), and binding it
on a context."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import USAGE, CliError, environment

__all__ = ["Model", "parse_shapes", "read_inputs", "load_model", "make_inputs", "bind"]

Shape = tuple[int, ...]
UNNAMED = ""


@dataclass
class Model:
    """A loaded model and the shapes and dtypes of its data inputs."""

    source: str                # the MODEL argument
    kind: str                  # "mxnet" or "onnx"
    symbol: Any
    arg_params: dict[str, Any]
    aux_params: dict[str, Any]
    data_names: list[str]      # arguments fed per forward, in graph order
    shapes: dict[str, Shape]
    dtypes: dict[str, np.dtype]

    @property
    def name(self) -> str:
        base = Path(self.source).name
        return base[:-5] if base.endswith(".onnx") else base


# ---- the command line's pieces ------------------------------------------------------------


def _name_value(text: str) -> tuple[str, str]:
    """("name", "value") from "name=value", (UNNAMED, text) otherwise."""
    name, sep, value = text.partition("=")
    return (name, value) if sep and name and "/" not in name else (UNNAMED, text)


def parse_shapes(items: Sequence[str]) -> dict[str, Shape]:
    """--shape values ("1,3,224,224" or "data=1,3,224,224") by input name."""
    shapes: dict[str, Shape] = {}
    for item in items:
        name, text = _name_value(item)
        try:
            shape = tuple(int(part) for part in text.replace("x", ",").split(",") if part)
        except ValueError:
            raise CliError(f"--shape {item!r}: expected comma-separated integers", USAGE) from None
        if not shape or any(d <= 0 for d in shape):
            raise CliError(f"--shape {item!r}: dimensions must be positive", USAGE)
        shapes[name] = shape
    return shapes


def read_inputs(items: Sequence[str]) -> dict[str, np.ndarray]:
    """--input values ("x.npy", "data=x.npy", or an .npz of named arrays)."""
    arrays: dict[str, np.ndarray] = {}
    for item in items:
        name, path = _name_value(item)
        if not os.path.isfile(path):
            raise environment(f"input file not found: {path}")
        try:
            loaded = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as error:
            raise environment(f"{path}: not a .npy or .npz file: {error}") from None
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                arrays.update({key: loaded[key] for key in loaded.files})
        else:
            arrays[name] = loaded
    return arrays


# ---- loading -------------------------------------------------------------------------------


def _checkpoint_prefix(source: str, epoch: int) -> str:
    """The checkpoint prefix of source: a prefix, a -symbol.json file, or a
    folder holding model-symbol.json."""
    prefix = source[:-len("-symbol.json")] if source.endswith("-symbol.json") else source
    if os.path.isdir(prefix) and os.path.isfile(os.path.join(prefix, "model-symbol.json")):
        prefix = os.path.join(prefix, "model")
    needed = [f"{prefix}-symbol.json", f"{prefix}-{epoch:04d}.params"]
    missing = [path for path in needed if not os.path.isfile(path)]
    if missing:
        raise environment(f"model not found: {' and '.join(missing)} do not exist (MODEL is an "
                          "MXNet checkpoint prefix, with --epoch, or an .onnx file)")
    return prefix


def load_model(source: str, epoch: int, shapes: Mapping[str, Shape],
               arrays: Mapping[str, np.ndarray], batch: int | None) -> Model:
    """The model, with every data input's shape and dtype resolved."""
    if source.endswith(".onnx"):
        return _load_onnx(source, shapes, arrays, batch)
    return _load_checkpoint(source, epoch, shapes, arrays, batch)


def _load_checkpoint(source: str, epoch: int, shapes: Mapping[str, Shape],
                     arrays: Mapping[str, np.ndarray], batch: int | None) -> Model:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..model import load_checkpoint
    from ..phases import phase

    with phase("read"):
        symbol, arg_params, aux_params = load_checkpoint(_checkpoint_prefix(source, epoch),
                                                         epoch)
    data_names = [name for name in symbol.list_arguments() if name not in arg_params]
    given = _assign(data_names, shapes, arrays)
    given = {name: _batched(shape, batch) for name, shape in given.items()}
    with phase("shape_inference"):
        resolved = _infer_missing(symbol, data_names, given)
    dtypes = _input_dtypes(data_names, arrays, {})
    return Model(source, "mxnet", symbol, arg_params, aux_params, data_names, resolved, dtypes)


def _load_onnx(source: str, shapes: Mapping[str, Shape], arrays: Mapping[str, np.ndarray],
               batch: int | None) -> Model:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..onnx.importer import data_inputs, import_graph, read_model
    from ..phases import phase

    if not os.path.isfile(source):
        raise environment(f"model not found: {source}")
    with phase("read"):
        proto = read_model(source)
    declared_inputs = data_inputs(proto)
    data_names = list(declared_inputs)
    given = _assign(data_names, shapes, arrays)
    declared = {name: declared_inputs[name][0] for name in data_names}
    wanted: dict[str, Shape] = {}
    for name in data_names:
        shape = given.get(name) or declared[name]
        if shape is None or (any(d is None or d < 0 for d in shape) and batch is None):
            raise CliError(f"{source}: the shape of input {name!r} is not fixed "
                           f"({declared[name]}); give --shape {name}=... or --batch", USAGE)
        wanted[name] = _batched(tuple(1 if d is None or d < 0 else int(d) for d in shape), batch)
    with phase("translate"):
        # the extents the model fixes replaced by the wanted ones; its
        # symbolic dimensions stay symbolic (worked out at bind)
        imported = import_graph(proto, input_shapes=wanted if wanted != declared else None)
    dtypes = _input_dtypes(data_names, arrays, imported.input_dtypes)
    return Model(source, "onnx", imported.symbol, imported.arg_params, imported.aux_params,
                 data_names, wanted, dtypes)


def _input_dtypes(data_names: Sequence[str], arrays: Mapping[str, np.ndarray],
                  declared: Mapping[str, Any]) -> dict[str, np.dtype]:
    """Each data input's dtype: its --input array's, else the model's
    declared one, else float32."""
    given = {(_primary(data_names) if name == UNNAMED else name): array.dtype
             for name, array in arrays.items()}
    return {name: np.dtype(given.get(name, declared.get(name) or np.float32))
            for name in data_names}


def _primary(data_names: Sequence[str]) -> str:
    """The input an unnamed --shape or --input is for."""
    inputs = [name for name in data_names if not name.endswith("_label")]
    if len(inputs) != 1:
        raise CliError(f"the model has inputs {', '.join(data_names)}: name them, as in "
                       f"--shape {inputs[0] if inputs else 'data'}=1,3,224,224", USAGE)
    return inputs[0]


def _assign(data_names: Sequence[str], shapes: Mapping[str, Shape],
            arrays: Mapping[str, np.ndarray]) -> dict[str, Shape]:
    """Shapes given for the data inputs (by --shape, or by the --input
    arrays' shapes), by input name; an unnamed one is the model's only
    data input's."""
    result: dict[str, Shape] = {}
    for source in (shapes, {name: array.shape for name, array in arrays.items()}):
        for name, shape in source.items():
            target = _primary(data_names) if name == UNNAMED else name
            if target not in data_names:
                raise CliError(f"the model has no input {target!r} (inputs: "
                               f"{', '.join(data_names) or 'none'})", USAGE)
            result[target] = tuple(int(d) for d in shape)
    return result


def _batched(shape: Shape, batch: int | None) -> Shape:
    return shape if batch is None or not shape else (batch, *shape[1:])


def _infer_missing(symbol: Any, data_names: Sequence[str],
                   given: dict[str, Shape]) -> dict[str, Shape]:
    """Shapes of every data input: given, or inferred from the given ones
    (a label's shape from the data's)."""
    missing = [name for name in data_names if name not in given]
    if not missing:
        return dict(given)
    try:
        arg_shapes, _, _ = symbol.infer_shape_partial(**given)
    except Exception:
        arg_shapes = [None] * len(symbol.list_arguments())
    inferred = dict(zip(symbol.list_arguments(), arg_shapes))
    unknown = [name for name in missing if not inferred.get(name)]
    if unknown:
        raise CliError(f"give the shape of input(s) {', '.join(unknown)}: --shape "
                       f"{unknown[0]}=1,3,224,224 (or --input {unknown[0]}=x.npy)", USAGE)
    return {**given, **{name: tuple(inferred[name]) for name in missing}}


# ---- inputs and binding ---------------------------------------------------------------------


def make_inputs(model: Model, arrays: Mapping[str, np.ndarray], seed: int) -> dict[str, Any]:
    """The values to feed: the given arrays (repeated along the batch axis
    when they hold one sample and --batch asks for more), random ones for
    the rest (normal floats, integers in [0, 2), from seed)."""
    named = {(_primary(model.data_names) if name == UNNAMED else name): array
             for name, array in arrays.items()}
    rng = np.random.default_rng(seed)
    values: dict[str, np.ndarray] = {}
    for name in model.data_names:
        shape, dtype = model.shapes[name], model.dtypes[name]
        if name in named:
            values[name] = _fit(name, np.asarray(named[name]), shape)
        elif np.issubdtype(dtype, np.floating):
            values[name] = rng.standard_normal(shape).astype(dtype)
        else:
            values[name] = rng.integers(0, 2, shape).astype(dtype)
    return values


def _fit(name: str, array: np.ndarray, shape: Shape) -> np.ndarray:
    if array.shape == shape:
        return array
    if array.shape[1:] == shape[1:] and array.shape[:1] == (1,):
        return np.repeat(array, shape[0], axis=0)
    raise CliError(f"input {name!r} has shape {array.shape}, the model takes {shape}", USAGE)


def bind(model: Model, ctx: Any) -> Any:
    """An executor of model on ctx; arrays whose dtype the ABI cannot
    describe stay in host memory (the CPU operators reading them run there)."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from .. import ndarray as nd

    symbol = model.symbol
    arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
    other = [name for name in arg_names if name not in model.arg_params
             and name not in model.shapes]
    shapes = dict(model.shapes)
    if other:
        inferred, _, _ = symbol.infer_shape_partial(**model.shapes)
        shapes.update({name: tuple(shape) for name, shape in zip(arg_names, inferred)
                       if name in other and shape})
    # The weights stay in host memory, where the model file put them:
    # loadModel reads them from there (a subgraph's weights are passed at
    # load), so copying them into the accelerator's memory first would be
    # one more pass over every weight (ResNet-50: 0.2-0.4 s of a cold start)
    # and a second copy held for nothing.
    args = {}
    for name in arg_names:
        if name in model.arg_params:
            args[name] = model.arg_params[name]
        else:
            dtype = model.dtypes.get(name, np.dtype(np.float32))
            args[name] = nd.zeros(shapes[name], _home(ctx, dtype), dtype)
    aux = {name: model.aux_params[name] for name in aux_names}
    return symbol.bind(ctx, args, aux_states=aux, data_names=list(model.data_names))


def _home(ctx: Any, dtype: Any) -> Any:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..abi.tensor import dtype_code
    from ..context import cpu
    from ..errors import TensorError

    if not ctx.is_accelerator:
        return ctx
    try:
        dtype_code(dtype)
    except TensorError:
        return cpu()
    return ctx
