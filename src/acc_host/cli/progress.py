"""A dependency-free progress bar on stderr.

Shown only when stderr is a terminal, unless forced (``--progress``) or
switched off (``--no-progress``); otherwise every method does nothing, so
the command's output stays clean in pipes, files and tests.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "enabled"]

_WIDTH = 28


def enabled(choice: bool | None, stream: TextIO | None = None) -> bool:
    """Whether to draw: choice when given (--progress / --no-progress),
    else whether the stream is a terminal."""
    if choice is not None:
        return choice
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """One bar: ``label [#####.....] done/total elapsed``, redrawn in place."""

    def __init__(self, label: str, total: int, show: bool,
                 stream: TextIO | None = None) -> None:
        self.label = label
        self.total = max(total, 1)
        self.done = 0
        self.show = show
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter()
        self._width = 0  # of the line last drawn, to blank what a shorter one leaves
        self._draw()

    def advance(self, steps: int = 1, label: str | None = None) -> None:
        """Marks steps more done (and changes the label, if given)."""
        self.done = min(self.done + steps, self.total)
        if label is not None:
            self.label = label
        self._draw()

    def close(self) -> None:
        """Ends the bar's line."""
        if self.show:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _draw(self) -> None:
        if not self.show:
            return
        filled = _WIDTH * self.done // self.total
        bar = "#" * filled + "." * (_WIDTH - filled)
        elapsed = time.perf_counter() - self.start
        line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:6.1f}s"
        self.stream.write(f"\r{line:<{self._width}}")
        self._width = max(self._width, len(line))
        self.stream.flush()
