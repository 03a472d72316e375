"""Accelerator libraries that installed Python packages register through the
``acc_host.plugins`` entry-point group.

The contract, for a vendor shipping a plugin as a Python package:

* The package declares an entry point in the group ``acc_host.plugins``
  (``[project.entry-points."acc_host.plugins"]`` in its pyproject.toml); the
  entry point's name is free, ``myacc = "myacc_plugin:library_path"``.
* The object the entry point names is either a path (``str`` or
  ``os.PathLike``) or a callable taking no arguments that returns a path or
  an iterable of paths. Typically it is a function of the vendor package
  returning the shared library the package ships as package data, so that
  it can look for the file (or a hardware driver) when it is called.
* Every path must be absolute. An empty iterable registers nothing: a
  package whose hardware is absent may say so that way.

:func:`library_paths` turns one entry point into paths or raises
:class:`~acc_host.errors.EntryPointError`; loading the libraries is the job
of :mod:`acc_host.plugins.discovery`. Entry points are read once per call of
:func:`plugin_entry_points` and come in the order of (distribution, name).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EntryPointError

if TYPE_CHECKING:  # importlib.metadata is imported only when the entry points are read
    from importlib.metadata import EntryPoint

__all__ = ["GROUP", "ENV_VAR", "enabled", "plugin_entry_points", "label", "library_paths"]

GROUP = "acc_host.plugins"
ENV_VAR = "MXNET_ACC_ENTRY_POINTS"  # "0": do not look at the entry points


def enabled() -> bool:
    """Whether discovery reads the entry points (unless ``MXNET_ACC_ENTRY_POINTS=0``)."""
    return os.environ.get(ENV_VAR, "1") != "0"


def plugin_entry_points() -> list[EntryPoint]:
    """Every entry point of the group, ordered by distribution and name."""
    from importlib.metadata import entry_points  # costs milliseconds: only when read

    return sorted(entry_points(group=GROUP), key=lambda point: (_distribution(point), point.name))


def _distribution(point: EntryPoint) -> str:
    """The distribution's normalized name (``myacc-plugin``), or ""."""
    dist = getattr(point, "dist", None)
    name = getattr(dist, "name", None)
    return re.sub(r"[-_.]+", "-", str(name)).lower() if name else ""


def label(point: EntryPoint) -> str:
    """``entry point DISTRIBUTION:NAME``: where a library came from (the
    distribution's name normalized as pip writes it, ``myacc-plugin``)."""
    dist = _distribution(point)
    return f"entry point {dist}:{point.name}" if dist else f"entry point {point.name}"


def library_paths(point: EntryPoint) -> list[Path]:
    """The absolute library paths the entry point gives.

    Raises EntryPointError when its module cannot be imported, its callable
    raises, or it gives anything but absolute paths. Whether the files exist
    and load is left to the loader, which names the path in its error.
    """
    where = label(point)
    try:
        target = point.load()
    except Exception as error:  # vendor code: anything can go wrong on import
        raise EntryPointError(f"{where}: loading {point.value} failed: "
                              f"{type(error).__name__}: {error}", where) from error
    if callable(target):
        try:
            target = target()
        except Exception as error:  # vendor code
            raise EntryPointError(f"{where}: {point.value}() raised "
                                  f"{type(error).__name__}: {error}", where) from error
        given = f"{point.value}() returned"
    else:
        given = f"{point.value} is"
    return [_absolute(path, where, given) for path in _as_paths(target, where, given)]


def _as_paths(value: Any, where: str, given: str) -> list[Any]:
    if isinstance(value, (str, os.PathLike)):
        return [value]
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        raise EntryPointError(f"{where}: {given} {_short(value)}; expected a path or an "
                              "iterable of paths", where)
    try:
        items = list(value)
    except Exception as error:  # a vendor generator can fail half-way
        raise EntryPointError(f"{where}: {given} an iterable whose iteration raised "
                              f"{type(error).__name__}: {error}", where) from error
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise EntryPointError(f"{where}: {given} an iterable holding {_short(item)}; "
                                  "expected paths (str or os.PathLike)", where)
    return items


def _absolute(value: str | os.PathLike[str], where: str, given: str) -> Path:
    text = os.fspath(value)
    if not isinstance(text, str):
        raise EntryPointError(f"{where}: {given} {_short(value)}, a bytes path; expected str "
                              "paths", where)
    path = Path(text)
    if not path.is_absolute():
        raise EntryPointError(f"{where}: {given} the relative path {str(path)!r}; library paths "
                              "must be absolute (e.g. built from the package's __file__)", where)
    return path


def _short(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {text}"
