""":class:`IsolatedLibrary`: an accelerator library whose plugin runs in a
child process (``mx.load_acc(path, isolate=True)``).

It is an :class:`acc_host.abi.library.AccLibrary` whose cffi library is a
:class:`RemoteLib`, so executors, subgraph operators, imperative dispatch,
device buffers and tracing use it unchanged. What differs: ``alive``
becomes False when the child dies (the registry then loads the file anew on
the next ``load_acc``), ``pid`` names the child, ``timeouts`` bound each
call, and :meth:`close` ends the child.
"""

from __future__ import annotations

import os
from typing import Any

from ..abi import header
from ..abi.library import AccLibrary
from .process import PluginProcess
from .remote import RemoteLib
from .settings import Timeouts, timeouts_from_environment

__all__ = ["IsolatedLibrary"]


class IsolatedLibrary(AccLibrary):
    """An accelerator library loaded in a child process of its own."""

    isolated = True

    def __init__(self, path: str | os.PathLike[str], acc_name: str | None = None,
                 timeouts: Timeouts | None = None, tracer: Any = None) -> None:
        self._timeouts = timeouts or timeouts_from_environment()
        self._process: PluginProcess | None = None
        try:
            super().__init__(path, acc_name, tracer)
        except BaseException:
            if self._process is not None:
                self._process.stop()
            raise
        self.process.label = self.name

    def _open(self) -> Any:
        self._check_file()
        self._process = PluginProcess(self.path, self._timeouts)
        return RemoteLib(self._process)

    @property
    def process(self) -> PluginProcess:
        assert self._process is not None
        return self._process

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.alive

    @property
    def pid(self) -> int:
        """The process id of the plugin's process."""
        return self.process.pid

    @property
    def death(self) -> BaseException | None:
        """The error that reported the plugin process's death (None while alive)."""
        return self.process.death

    @property
    def timeouts(self) -> Timeouts:
        return self._timeouts

    @timeouts.setter
    def timeouts(self, value: Timeouts) -> None:
        self._timeouts = self.process.timeouts = value

    def check(self, accelerator: str, function: str, status: int, context: str = "") -> None:
        if status != header.OK and function == "executor forward":
            pending = self._raw_lib.take_pending()
            if pending is not None:  # the callback's error (a crash...), not a status
                raise pending
        super().check(accelerator, function, status, context)

    def close(self) -> None:
        """Ends the plugin process: every later call raises
        LibraryDeadError (idempotent)."""
        if self._process is not None:
            self._process.stop()

    def __repr__(self) -> str:
        state = f"pid {self._process.pid}" if self.alive and self._process is not None \
            else "dead"
        return (f"IsolatedLibrary(name={self._known_name()!r}, path={self.path!r}, "
                f"devices={getattr(self, 'num_devices', None)}, {state})")
