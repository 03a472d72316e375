"""The acc_host exception hierarchy.

Every error acc_host raises on purpose derives from :class:`AccHostError`.
Where a standard exception describes the same situation, the acc_host class
also derives from it (a missing library file is a ``FileNotFoundError``, a
bad device id a ``ValueError``), so either can be caught.
"""

from __future__ import annotations

__all__ = [
    "AccHostError",
    "TraceError",
    "LibraryError",
    "LibraryNotFoundError",
    "NotALibraryError",
    "MissingSymbolsError",
    "AccVersionError",
    "InvalidAccNameError",
    "AccNameConflictError",
    "NoDeviceError",
    "EntryPointError",
    "PluginError",
    "PluginUnsupportedError",
    "PluginOutOfMemoryError",
    "PluginContractError",
    "InvalidArgumentError",
    "ContextError",
    "UnknownAcceleratorError",
    "TensorError",
    "OperatorError",
    "UnknownOperatorError",
    "UnsupportedOnnxOperatorError",
    "UnsupportedOnnxExportError",
    "ShapeError",
    "DTypeError",
    "RankError",
    "OperatorInternalError",
    "GraphError",
    "AllocationTooLargeError",
    "ModelFileError",
    "ModelFileNotFoundError",
    "EngineError",
    "DeletedVarError",
    "IsolationError",
    "PluginCrashedError",
    "PluginTimeoutError",
    "LibraryDeadError",
    "MissingDependencyError",
    "PortInUseError",
]


class AccHostError(Exception):
    """Root of every error raised by acc_host."""


# ---- loading a library -------------------------------------------------------


class LibraryError(AccHostError):
    """An accelerator library cannot be loaded or used. ``path`` names it."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class LibraryNotFoundError(LibraryError, FileNotFoundError):
    """The library file does not exist."""


class NotALibraryError(LibraryError):
    """The file exists but the dynamic loader refused it; the message quotes
    the loader's own explanation."""


class MissingSymbolsError(LibraryError):
    """Required entry points are not exported; ``missing`` lists all of them."""

    def __init__(self, message: str, path: str, missing: list[str]) -> None:
        super().__init__(message, path)
        self.missing = missing


class AccVersionError(LibraryError):
    """The library and the host disagree on the ABI version."""

    def __init__(self, message: str, path: str, host_version: int,
                 plugin_version: int | None) -> None:
        super().__init__(message, path)
        self.host_version = host_version
        self.plugin_version = plugin_version


class InvalidAccNameError(LibraryError, ValueError):
    """The accelerator name cannot become a context type."""


class AccNameConflictError(LibraryError):
    """Another, different library already uses the accelerator name."""


class NoDeviceError(LibraryError):
    """The library reports no device (getNumAcc() < 1)."""


class EntryPointError(LibraryError):
    """An entry point of the ``acc_host.plugins`` group gave no usable library
    path: its module failed to import, its function raised, or it returned
    something that is not an absolute path. ``entry_point`` is its label,
    ``entry point DISTRIBUTION:NAME``."""

    def __init__(self, message: str, entry_point: str) -> None:
        super().__init__(message)
        self.entry_point = entry_point


# ---- calls into a loaded library -------------------------------------------------


class PluginError(AccHostError):
    """A plugin function returned a failure code.

    ``function`` is the ABI function, ``code`` the status, ``code_name`` its
    symbolic name and ``plugin_message`` the plugin's own text (from
    accGetLastError), or ``""`` when it gave none.
    """

    def __init__(self, accelerator: str, function: str, code: int, code_name: str,
                 plugin_message: str, context: str = "") -> None:
        where = f" ({context})" if context else ""
        detail = f": {plugin_message}" if plugin_message else ""
        super().__init__(f"{accelerator}: {function}{where} failed with {code_name}{detail}")
        self.accelerator = accelerator
        self.function = function
        self.code = code
        self.code_name = code_name
        self.plugin_message = plugin_message


class PluginUnsupportedError(PluginError):
    """The plugin does not support the operator, dtype or feature asked for."""


class PluginOutOfMemoryError(PluginError, MemoryError):
    """The plugin ran out of host or accelerator memory."""


class PluginContractError(AccHostError):
    """A plugin broke the ABI contract: an answer out of range, a NULL where
    the header promises a value. The message names the plugin."""


# ---- arguments -------------------------------------------------------------------


class InvalidArgumentError(AccHostError, ValueError):
    """An argument acc_host cannot pass on: a string with a NUL character, a
    negative count, a value of the wrong kind."""


class ContextError(InvalidArgumentError):
    """An unknown accelerator, a device id out of range, or a context used
    where it cannot be."""


class UnknownAcceleratorError(ContextError, AttributeError):
    """``mx.<name>(i)`` or ``mx.Context(name, i)`` for an accelerator no
    loaded library provides. Also an ``AttributeError``, so that
    ``getattr(mx, name, default)`` and ``hasattr`` keep working."""


class TensorError(InvalidArgumentError):
    """An array cannot be passed to a plugin: unsupported dtype, too many
    dimensions, or not contiguous."""


# ---- operators, graphs and model files ------------------------------------------


class OperatorError(InvalidArgumentError):
    """An operator's attributes or inputs are invalid; the message names the
    operator (and the node, when there is one)."""


class UnknownOperatorError(OperatorError):
    """No operator of that name is registered."""


class UnsupportedOnnxOperatorError(OperatorError):
    """An ONNX model uses operators (or operator forms) the importer cannot
    translate. ``unsupported`` lists every one of them at once, as
    ``(domain, op_type, opset, reason)`` tuples; ``dynamic_inputs`` names
    the graph inputs whose values the import needed as constants (the ONNX
    backend imports such a model again with their values frozen)."""

    def __init__(self, message: str, unsupported: list | None = None,
                 dynamic_inputs: list[str] | None = None) -> None:
        super().__init__(message)
        self.unsupported = list(unsupported or [])
        self.dynamic_inputs = list(dynamic_inputs or [])


class UnsupportedOnnxExportError(OperatorError):
    """A symbol uses operators (or operator forms) ``mx.onnx.export_model``
    cannot write as ONNX. ``unsupported`` lists every one of them at once, as
    ``(node_name, operator, reason)`` tuples."""

    def __init__(self, message: str, unsupported: list | None = None) -> None:
        super().__init__(message)
        self.unsupported = list(unsupported or [])


class ShapeError(OperatorError):
    """Shapes or dtypes are inconsistent, or cannot be inferred."""


class DTypeError(ShapeError):
    """An input's dtype is not the one the operator or the model takes; the
    message names the input, its dtype and the dtype expected."""


class OperatorInternalError(OperatorError):
    """An operator's inference or computation raised an exception that is
    not an acc_host error: input it does not validate yet. The message names
    the operator and its inputs' shapes and dtypes; ``__cause__`` is the
    original exception. Raised by the imperative dispatch (``mx.nd.<op>``)
    and the CPU path of executors as a last resort."""


class RankError(ShapeError):
    """A result would have more dimensions than numpy arrays may have
    (``acc_host.limits.MAX_DIMS``: 64, 32 before numpy 2); refused before
    numpy is asked for it."""


class GraphError(InvalidArgumentError):
    """A symbol graph is malformed: a cycle, a dangling input, a missing
    argument or parameter."""


class AllocationTooLargeError(InvalidArgumentError, MemoryError):
    """Declared shapes need more memory than the machine has (or than
    ``MXNET_ACC_MAX_ALLOC_BYTES`` allows); refused before anything is
    allocated. ``nbytes`` is what was asked for, ``limit`` the limit."""

    def __init__(self, message: str, nbytes: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.nbytes = nbytes
        self.limit = limit


class ModelFileError(AccHostError, ValueError):
    """A model or parameter file is corrupt, truncated or not in the
    expected format, or cannot be read (a directory, no permission); the
    message names the file and the offset."""


class ModelFileNotFoundError(ModelFileError, FileNotFoundError):
    """A model file (``prefix-symbol.json``, ``prefix-NNNN.params``) does
    not exist; the message and ``filename`` (``FileNotFoundError``'s
    attribute) name it."""

    def __init__(self, message: str, filename: str = "") -> None:
        super().__init__(message)
        self.filename = filename

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def model_file_os_error(path: str, error: OSError) -> ModelFileError:
    """The error for a model or parameter file that cannot be opened."""
    if isinstance(error, FileNotFoundError):
        return ModelFileNotFoundError(f"{path}: no such file", path)
    if isinstance(error, IsADirectoryError):
        return ModelFileError(f"{path}: is a directory, not a model or parameter file")
    return ModelFileError(f"{path}: cannot be read: {error.strerror or error}")


class TraceError(AccHostError, ValueError):
    """A call trace cannot be written, read or replayed (acc_host.trace)."""


# ---- the dependency engine ----------------------------------------------------------


class EngineError(AccHostError, RuntimeError):
    """The engine was misused: a wait inside a pushed function, a callback
    called twice, an unknown MXNET_ENGINE_TYPE, a value that is not a var."""


class DeletedVarError(EngineError):
    """A var deleted with push_delete() was used again."""


# ---- isolated libraries (acc_host.isolate) ------------------------------------------


class IsolationError(LibraryError):
    """An isolated library's plugin process cannot be started or talked to
    (see docs/isolation.md). ``accelerator`` names the library."""

    def __init__(self, message: str, path: str | None = None, accelerator: str = "") -> None:
        super().__init__(message, path)
        self.accelerator = accelerator


class PluginCrashedError(IsolationError):
    """The plugin process of an isolated library died during a call: a
    signal (``signal`` is its name, e.g. ``"SIGSEGV"``) or an exit
    (``exit_code``). ``function`` is the ABI function that was running. The
    host is unaffected; the library is unusable until it is loaded again."""

    def __init__(self, message: str, path: str | None = None, accelerator: str = "",
                 function: str = "", signal: str | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(message, path, accelerator)
        self.function = function
        self.signal = signal
        self.exit_code = exit_code


class PluginTimeoutError(PluginCrashedError, TimeoutError):
    """A call into an isolated library did not return within ``timeout``
    seconds; the host killed the plugin process."""

    def __init__(self, message: str, path: str | None = None, accelerator: str = "",
                 function: str = "", timeout: float = 0.0) -> None:
        super().__init__(message, path, accelerator, function, "SIGKILL", None)
        self.timeout = timeout


class LibraryDeadError(IsolationError):
    """A call into an isolated library whose plugin process died earlier;
    ``cause`` is the error that reported the death. Load the library again
    (``mx.load_acc(path, isolate=True)``) to start a new process."""

    def __init__(self, message: str, path: str | None = None, accelerator: str = "",
                 cause: BaseException | None = None) -> None:
        super().__init__(message, path, accelerator)
        self.cause = cause


class MissingDependencyError(AccHostError, ImportError):
    """An optional package a feature needs is not installed (for example
    matplotlib for PNG pictures); the message names it and how to install it."""


class PortInUseError(AccHostError, OSError):
    """A server cannot take its TCP port: another process listens on it
    (``acc-host serve``'s HTTP or gRPC port); the message names the port
    and the server."""
