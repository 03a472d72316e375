"""Checkpoints as MXNet writes them (``mx.model``): ``<prefix>-symbol.json``
and ``<prefix>-<epoch:04d>.params`` with keys "arg:<name>" and "aux:<name>"."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from . import ndarray as nd
from . import symbol as sym
from .errors import ModelFileError, ModelFileNotFoundError
from .ndarray import NDArray
from .symbol import Symbol

__all__ = ["load_checkpoint", "save_checkpoint", "load_params"]


def _params_path(prefix: str | Path, epoch: int) -> Path:
    return Path(f"{prefix}-{epoch:04d}.params")


def _epochs_text(prefix: str | Path) -> str:
    """"epochs saved with this prefix: 1, 2" (or that there are none)."""
    base = Path(prefix)
    try:
        names = [path.name for path in base.parent.iterdir()]
    except OSError:
        names = []
    epochs = sorted(int(match.group(1)) for name in names
                    if (match := re.fullmatch(re.escape(base.name) + r"-(\d{4,})\.params", name)))
    if not epochs:
        return f"no parameter file {base.name}-NNNN.params is in {base.parent}"
    return f"epochs saved with this prefix: {', '.join(map(str, epochs))}"


def load_params(fname: str | Path) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
    """(arg_params, aux_params) of a checkpoint's parameter file."""
    loaded = nd.load(fname)
    if not isinstance(loaded, dict):
        raise ModelFileError(f"{fname}: a checkpoint's parameters must be named "
                             "('arg:<name>' / 'aux:<name>'), this file stores a plain list")
    arg_params: dict[str, NDArray] = {}
    aux_params: dict[str, NDArray] = {}
    for key, value in loaded.items():
        kind, _, name = key.partition(":")
        if kind == "arg" and name:
            arg_params[name] = value
        elif kind == "aux" and name:
            aux_params[name] = value
        else:
            raise ModelFileError(f"{fname}: parameter {key!r} is neither 'arg:<name>' nor "
                                 "'aux:<name>'")
    return arg_params, aux_params


def load_checkpoint(prefix: str | Path, epoch: int) -> tuple[Symbol, dict[str, NDArray],
                                                             dict[str, NDArray]]:
    """(symbol, arg_params, aux_params) from ``prefix-symbol.json`` and
    ``prefix-<epoch:04d>.params``. A missing file, either one, is a
    ModelFileNotFoundError naming it (and the epochs the prefix has)."""
    symbol_path, params_path = Path(f"{prefix}-symbol.json"), _params_path(prefix, epoch)
    missing = [path for path in (symbol_path, params_path) if not path.is_file()]
    if missing:
        raise ModelFileNotFoundError(
            f"load_checkpoint({str(prefix)!r}, {epoch}): {' and '.join(map(str, missing))} "
            f"not found; {_epochs_text(prefix)}", str(missing[0]))
    symbol = sym.load(symbol_path)
    arg_params, aux_params = load_params(params_path)
    return symbol, arg_params, aux_params


def save_checkpoint(prefix: str | Path, epoch: int, symbol: Symbol,
                    arg_params: Mapping[str, NDArray], aux_params: Mapping[str, NDArray],
                    remove_amp_cast: bool = True) -> None:
    """Writes ``prefix-symbol.json`` and ``prefix-<epoch:04d>.params``, as
    MXNet does (arguments first, then auxiliary states)."""
    if symbol is not None:
        symbol.save(f"{prefix}-symbol.json")
    params = {f"arg:{name}": value for name, value in arg_params.items()}
    params.update({f"aux:{name}": value for name, value in aux_params.items()})
    nd.save(_params_path(prefix, epoch), params)
