"""The child process of one isolated library, and the channels to it.

The child (``child.py``, run by this interpreter as a script) dlopens the
plugin and serves calls. The control socket, served by the child's main
thread, only starts the library and opens channels; each channel is a
socket pair served by a thread of its own in the child, used by one host
thread at a time (a pool: as many channels as host threads have called at
once). A call sends one request and waits, up to its timeout, for one
reply.

When the child dies (a signal, an exit) the call waiting on it raises
:class:`PluginCrashedError` naming the signal; a call that times out kills
the child and raises :class:`PluginTimeoutError`. From then on the process
is dead: every call raises :class:`LibraryDeadError` (except the ones that
release memory, models and executors, which died with the child and so
succeed at once).
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import (
    IsolationError,
    LibraryDeadError,
    NotALibraryError,
    PluginContractError,
    PluginCrashedError,
    PluginTimeoutError,
)
from . import shared, wire
from .arguments import CallMemory, GuardError
from .settings import LOAD_FUNCTIONS, LOAD_TIMEOUT_ENV_VAR, TIMEOUT_ENV_VAR, Timeouts

__all__ = ["PluginProcess", "CHILD_SCRIPT"]

CHILD_SCRIPT = Path(__file__).resolve().parent / "child.py"
_REAP_SECONDS = 5.0
_MIN_STAGING = 1 << 20
# A channel keeps its staging segment for its next calls up to this size; a
# larger one (weights of a big model at loadModel) is dropped after its call.
_KEEP_STAGING = 256 << 20


def _shown(function: str) -> str:
    """The name of a request in messages: the ABI function, or what the host
    calls an executor's functions."""
    return function.replace("executor_", "executor ")


def _describe_exit(returncode: int | None) -> tuple[str, str | None, int | None]:
    """("died with signal SIGSEGV", "SIGSEGV", None) and the like."""
    if returncode is None:
        return "closed its connection", None, None
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"died with signal {name}", name, None
    return f"exited with status {returncode}", None, returncode


class _Channel:
    """One socket pair to a serving thread of the child, and its staging
    segment."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.staging: shared.Segment | None = None

    def close(self) -> None:
        self.sock.close()
        if self.staging is not None:
            self.staging.close()
            self.staging = None


class PluginProcess:
    """The plugin at path, dlopened in a child process."""

    def __init__(self, path: str, timeouts: Timeouts) -> None:
        self.path = path
        self.label = os.path.basename(path)  # the accelerator's name, once known
        self.timeouts = timeouts
        self._state_lock = threading.RLock()
        self._death: BaseException | None = None
        self._free: list[_Channel] = []
        self._channels: list[_Channel] = []
        self._known: set[int] = set()  # shared segments the child mapped
        self._gone: list[int] = []  # segments to unmap, sent with the next request
        self._in_flight: dict[int, str] = {}  # the calls waiting for the child, by socket
        # Bytes of host memory copied into and out of staging segments (a
        # statistic: not updated atomically across threads).
        self.copied_bytes = 0
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._control = parent
        self._control_lock = threading.RLock()
        try:
            self._popen = subprocess.Popen(
                [sys.executable, str(CHILD_SCRIPT), path, str(child.fileno())],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
        except OSError as error:
            parent.close()
            raise IsolationError(f"{path}: cannot start the plugin process: {error}",
                                 path) from None
        finally:
            child.close()
        self.pid = self._popen.pid
        shared.subscribe(self)
        try:
            reply = self._exchange(self._control, "start", "", ("start",), (),
                                   time.monotonic() + timeouts.load)
        except BaseException:
            self.stop()  # the child is dead or killed already: closes the socket
            raise
        if reply[0] == "error":
            self.stop()
            reason = str(reply[1]).split("  Additionally, ctypes.util", 1)[0]
            raise NotALibraryError(f"{path} is not a loadable library: {reason}", path)
        self.symbols: frozenset[str] = frozenset(reply[1]["symbols"])

    # ---- state ------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._death is None

    @property
    def death(self) -> BaseException | None:
        """The error that reported the death (None while alive)."""
        return self._death

    def dead_error(self, function: str) -> LibraryDeadError:
        cause = self._death
        return LibraryDeadError(
            f"{self.label}: cannot call {_shown(function)}(): the plugin process is gone: {cause}",
            self.path, self.label, cause)

    def segment_gone(self, segment_id: int) -> None:
        """A shared array's segment was freed: unmap it in the child too."""
        with self._state_lock:
            if segment_id in self._known:
                self._known.discard(segment_id)
                self._gone.append(segment_id)

    # ---- calls ------------------------------------------------------------------------

    def call(self, function: str, args: tuple[Any, ...], memory: CallMemory | None = None,
             context: str = "") -> Any:
        """function(*args) in the child; returns its answer. memory: the host
        memory the call passes (staged and copied back here)."""
        if self._death is not None:
            raise self.dead_error(function)
        channel = self._acquire(function)
        healthy = False
        try:
            segments, fds = self._segments_for(channel, memory)
            if memory is not None and channel.staging is not None:
                self.copied_bytes += memory.place(channel.staging)
            with self._state_lock:
                gone, self._gone = self._gone, []
            deadline = time.monotonic() + self.timeouts.of(function)
            kind, value = self._exchange(channel.sock, function, context,
                                         (function, segments, gone, args), fds, deadline)
            if kind not in ("ok", "exc"):
                raise self._broken(function, f"a reply of unknown kind {kind!r}")
            if memory is not None and channel.staging is not None and kind == "ok":
                try:
                    self.copied_bytes += memory.copy_back(channel.staging, value)
                except GuardError as error:
                    raise PluginContractError(
                        f"{self.label}: {self._where(function, context)} {error} (a buffer "
                        "overrun, caught in the guard the host puts after each tensor in "
                        "shared memory); its outputs were discarded") from None
            if channel.staging is not None and channel.staging.size > _KEEP_STAGING:
                with self._state_lock:
                    self._gone.append(channel.staging.id)
                channel.staging.close()
                channel.staging = None
            healthy = True
        finally:
            self._release(channel, healthy)
        if kind == "exc":
            raise IsolationError(f"{self.label}: {_shown(function)}() failed in the plugin "
                                 f"process: {value}", self.path, self.label)
        return value

    def _release(self, channel: _Channel, healthy: bool) -> None:
        """Back to the pool after a call, or closed (after a failed call, or
        once the process is dead)."""
        with self._state_lock:
            if healthy and self._death is None:
                self._free.append(channel)
                return
            if channel in self._channels:
                self._channels.remove(channel)
        channel.close()

    def _segments_for(self, channel: _Channel,
                      memory: CallMemory | None) -> tuple[list[tuple[int, int]], list[int]]:
        """The segments the child must map for this call: a new staging
        segment when the call needs more than the channel has, and the
        shared arrays' segments it has not seen; with their descriptors."""
        segments: list[tuple[int, int]] = []
        fds: list[int] = []
        if memory is None:
            return segments, fds
        needed = memory.staging_bytes
        if memory.staged and (channel.staging is None or channel.staging.size < needed):
            if channel.staging is not None:
                with self._state_lock:
                    self._gone.append(channel.staging.id)
                channel.staging.close()
            size = _MIN_STAGING
            while size < needed:
                size *= 2
            channel.staging = shared.Segment(size, "staging")
            segments.append((channel.staging.id, channel.staging.size))
            fds.append(channel.staging.fd)
        with self._state_lock:
            for segment_id, entry in memory.segments.items():
                if segment_id not in self._known:
                    segments.append((entry.id, entry.size))
                    fds.append(entry.fd)
                    self._known.add(segment_id)
        if len(fds) > wire.MAX_FDS:  # map the rest first, MAX_FDS at a time
            head, fds = fds[:-wire.MAX_FDS], fds[-wire.MAX_FDS:]
            mapped, segments = segments[:len(head)], segments[len(head):]
            for start in range(0, len(head), wire.MAX_FDS):
                self._exchange(channel.sock, "map", "",
                               ("map", mapped[start:start + wire.MAX_FDS], [], ()),
                               head[start:start + wire.MAX_FDS],
                               time.monotonic() + self.timeouts.call)
        return segments, fds

    def _acquire(self, function: str) -> _Channel:
        with self._state_lock:
            if self._free:
                return self._free.pop()
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # No answer is awaited: the child serves the channel once it reads
        # this, before the first request on it. (Re-entrant and one short
        # send: a finalizer that calls the plugin from inside this, through
        # the garbage collector, cannot interleave with it.)
        try:
            with self._control_lock:
                wire.send(self._control, ("channel",), (child_end.fileno(),))
        except (wire.Closed, OSError):
            host_end.close()
            raise self._crashed(function, "", in_flight=False) from None
        except BaseException:
            host_end.close()
            raise
        finally:
            child_end.close()
        channel = _Channel(host_end)
        with self._state_lock:
            self._channels.append(channel)
        return channel

    def _exchange(self, sock: socket.socket, function: str, context: str, message: Any,
                  fds: tuple[int, ...] | list[int], deadline: float) -> Any:
        """Sends message and returns the reply; a dead child, a timeout or a
        reply that is not plain data becomes the matching error."""
        frame = wire.encode(message)  # outside: a message that cannot be sent is not the child's
        token = id(sock)
        with self._state_lock:
            self._in_flight[token] = self._where(function, context)
        try:
            wire.send(sock, frame, fds)
            reply, extra = wire.recv(sock, deadline, wire.loads_plain, wire.MAX_REPLY_BYTES)
        except TimeoutError:
            raise self._timed_out(function, context) from None
        except (wire.Closed, OSError):
            raise self._crashed(function, context) from None
        except wire.TooLarge as error:
            raise self._broken(function, f"{error} (wire.MAX_REPLY_BYTES)") from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, MemoryError,
                RecursionError, IndexError, KeyError, AttributeError) as error:
            raise self._broken(function, f"an unreadable reply ({error})") from None
        finally:
            with self._state_lock:
                self._in_flight.pop(token, None)
        for fd in extra:
            os.close(fd)
        if not (isinstance(reply, tuple) and len(reply) == 2):
            raise self._broken(function, f"a reply that is not a (kind, value) pair: "
                                         f"{type(reply).__name__}")
        return reply

    # ---- death ------------------------------------------------------------------------

    def _where(self, function: str, context: str) -> str:
        return f"{_shown(function)}({context})"

    def _reload_hint(self) -> str:
        return (f"Load the library again to start a new process: "
                f"mx.load_acc({self.path!r}, isolate=True)")

    def _crashed(self, function: str, context: str, in_flight: bool = True) -> BaseException:
        """The error of a call that found the child gone: in_flight, its
        connection closed under it (PluginCrashedError); else it found the
        process dead before its request was sent (LibraryDeadError). The
        death is recorded once, naming the calls that were running."""
        with self._state_lock:
            earlier = self._death
            if earlier is None:
                what, signal_name, exit_code = _describe_exit(self._reap(kill=False))
                running = list(self._in_flight.values())
                if not running:
                    during = "while no call was running"
                elif len(running) == 1:
                    during = f"during {running[0]}"
                else:
                    during = f"during one of {', '.join(running)}"
                death = self._record(PluginCrashedError(
                    f"{self.label}: the plugin process (pid {self.pid}) of {self.path} {what} "
                    f"{during}; this process is unaffected. {self._reload_hint()}", self.path,
                    self.label, function if in_flight else "", signal_name, exit_code))
        if not in_flight:
            return self.dead_error(function)
        if earlier is None:
            return death
        if isinstance(earlier, PluginCrashedError) and not isinstance(earlier, PluginTimeoutError):
            # The death another running call saw first.
            return PluginCrashedError(str(earlier), self.path, self.label, function,
                                      earlier.signal, earlier.exit_code)
        return PluginCrashedError(  # killed after another call timed out, or closed
            f"{self.label}: the plugin process (pid {self.pid}) was stopped during "
            f"{self._where(function, context)}: {earlier}", self.path, self.label, function,
            "SIGKILL", None)

    def _timed_out(self, function: str, context: str) -> BaseException:
        seconds = self.timeouts.of(function)
        variable = LOAD_TIMEOUT_ENV_VAR if function in LOAD_FUNCTIONS else TIMEOUT_ENV_VAR
        with self._state_lock:
            self._reap(kill=True)
        return self._record(PluginTimeoutError(
            f"{self.label}: {self._where(function, context)} did not return within {seconds:g} s "
            f"({variable}); the plugin process (pid {self.pid}) was killed. "
            f"{self._reload_hint()}", self.path, self.label, function, seconds))

    def _broken(self, function: str, what: str) -> BaseException:
        """The error of a call whose reply broke the protocol: the child is
        killed and the library is dead from then on (a child that wrote
        garbage on its socket cannot be trusted with another call)."""
        with self._state_lock:
            self._reap(kill=True)
        return self._record(PluginCrashedError(
            f"{self.label}: the plugin process (pid {self.pid}) broke the protocol: it sent "
            f"{what} during {_shown(function)}(); it was killed. {self._reload_hint()}",
            self.path, self.label, function, "SIGKILL", None))

    def _record(self, error: BaseException) -> BaseException:
        """Makes error the death of the process (unless one is recorded
        already) and closes the idle channels; returns error."""
        with self._state_lock:
            if self._death is None:
                self._death = error
            idle, self._free = self._free, []
            for channel in idle:
                self._channels.remove(channel)
        for channel in idle:
            channel.close()
        return error

    def _reap(self, kill: bool) -> int | None:
        """Waits for the child to end, killing it first if kill, or if it
        does not end by itself; returns its exit code, or None when it had
        to be killed without kill (it closed its connection but lived on)."""
        if kill and self._popen.poll() is None:
            self._popen.kill()
        try:
            return self._popen.wait(_REAP_SECONDS)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait()
            return self._popen.returncode if kill else None

    def stop(self) -> None:
        """Ends the child (it exits when its control socket closes) and
        marks the process dead; idempotent."""
        self._record(IsolationError(f"{self.label}: the library was closed", self.path,
                                    self.label))
        with self._control_lock:
            self._control.close()
        with self._state_lock:
            self._reap(kill=False)
