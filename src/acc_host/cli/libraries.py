"""Turning a command line's LIB or --acc argument into a loaded library or
a context: a path to a shared library, or the name of an accelerator that
discovery already loaded (``cpu`` being the host's CPU path)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .errors import USAGE, CliError, environment

if TYPE_CHECKING:
    from ..abi.library import AccLibrary
    from ..context import Context

__all__ = ["is_path", "open_library", "context_for", "known_names"]

_SUFFIXES = (".so", ".dylib", ".dll")


def is_path(text: str) -> bool:
    """Whether text names a file rather than an accelerator."""
    return os.sep in text or "/" in text or text.endswith(_SUFFIXES) or ".so." in text


def known_names() -> list[str]:
    """Names of the accelerators loaded in this process."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..plugins.registry import libraries

    return [library.name for library in libraries()]


def _unknown(name: str) -> CliError:
    names = ", ".join(known_names()) or "none"
    return environment(f"no accelerator called {name!r} was found (found: {names}); give the "
                       "path of its library, or see 'acc-host list'")


def _load(path: str) -> AccLibrary:
    """The library at path: the registered one when that file is loaded,
    else a new one (registered, so that contexts can name it)."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..abi.library import AccLibrary
    from ..errors import AccNameConflictError, LibraryError
    from ..plugins.registry import register
    from ..trace import recorder

    if not os.path.exists(path):
        raise environment(f"accelerator library not found: {path}")
    try:
        return register(path)
    except AccNameConflictError:
        try:
            # same name as a loaded library: inspect it unregistered
            return AccLibrary(path, tracer=recorder.current())
        except LibraryError as error:
            raise environment(str(error)) from None
    except LibraryError as error:
        raise environment(str(error)) from None


def open_library(spec: str) -> AccLibrary:
    """The library named or pointed at by spec."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..plugins.registry import _state

    if is_path(spec):
        return _load(spec)
    library = _state.by_name.get(spec)
    if library is None:
        raise _unknown(spec)
    return library


def context_for(spec: str, device: int) -> Context:
    """The context of device on the accelerator spec ("cpu": the host)."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..context import Context, cpu
    from ..plugins.registry import _state

    if spec.lower() == "cpu":
        return cpu()
    if is_path(spec):
        library = _load(spec)
        if _state.by_name.get(library.name) is not library:
            raise environment(f"{spec}: its accelerator name {library.name!r} is taken by "
                              f"{_state.by_name[library.name].path}")
    else:
        library = open_library(spec)
    if not 0 <= device < library.num_devices:
        raise CliError(f"{library.name} has {library.num_devices} device(s); --device {device} "
                       "does not exist", USAGE)
    return Context(library.name, device)
