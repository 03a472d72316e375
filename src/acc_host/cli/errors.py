"""Exit codes of the ``acc-host`` command and the error that carries one.

Scripts can rely on these (docs/cli.md):

* 0 (:data:`OK`): the command did what was asked;
* 1 (:data:`FAILURE`): the thing asked failed: a check failed, a run or a
  partition raised an acc_host error;
* 2 (:data:`USAGE`): the command line is wrong (argparse's own code), or
  the input it gives does not fit the model: a ShapeError (DTypeError
  included) from binding the model to the shapes and dtypes of ``--shape``
  and ``--input``;
* 3 (:data:`ENVIRONMENT`): something the command needs is missing or
  unusable: a file, a library that cannot load, an accelerator name nobody
  registered, Graphviz, the conformance kit.
"""

from __future__ import annotations

__all__ = ["OK", "FAILURE", "USAGE", "ENVIRONMENT", "CliError", "environment", "failure",
           "exit_code"]

OK = 0
FAILURE = 1
USAGE = 2
ENVIRONMENT = 3


class CliError(Exception):
    """An error the command reports as ``acc-host: error: <message>`` and
    exits with ``code``."""

    def __init__(self, message: str, code: int = FAILURE) -> None:
        super().__init__(message)
        self.code = code


def environment(message: str) -> CliError:
    """A CliError for a missing or unusable prerequisite (exit 3)."""
    return CliError(message, ENVIRONMENT)


def failure(message: str) -> CliError:
    """A CliError for a failure of the thing asked (exit 1)."""
    return CliError(message, FAILURE)


def exit_code(error: BaseException) -> int:
    """The exit status of an acc_host error or OSError that a command did
    not turn into a CliError: 2 for input the model does not take (a
    ShapeError: the shapes and dtypes come from the command line), 3 for
    what the environment lacks (files, loadable libraries, the onnx
    package), 1 for the rest."""
    from ..errors import LibraryError, ModelFileError, ShapeError

    if isinstance(error, CliError):
        return error.code
    if isinstance(error, ShapeError):
        return USAGE
    if isinstance(error, (LibraryError, ModelFileError, OSError, ImportError)):
        return ENVIRONMENT
    return FAILURE
