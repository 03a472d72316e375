"""Rendering DOT to SVG or PNG with Graphviz's ``dot`` program
(``acc-host partition --renderer graphviz``; the default renderer is
acc_host.drawing, which needs no Graphviz)."""

from __future__ import annotations

import shutil
import subprocess

from .errors import environment, failure

__all__ = ["DOT_PROGRAM", "to_svg", "to_png"]

DOT_PROGRAM = "dot"
_TIMEOUT_S = 120


def to_svg(dot_text: str) -> str:
    """dot_text rendered by ``dot -Tsvg``; a CliError (exit 3) when Graphviz
    is not on PATH, (exit 1) when it fails."""
    return _dot(dot_text, "svg").decode("utf-8")


def to_png(dot_text: str) -> bytes:
    """dot_text rendered by ``dot -Tpng`` (errors as to_svg)."""
    return _dot(dot_text, "png")


def _dot(dot_text: str, form: str) -> bytes:
    program = shutil.which(DOT_PROGRAM)
    if program is None:
        raise environment("--renderer graphviz needs Graphviz: the 'dot' program is not on "
                          "PATH (install Graphviz, e.g. 'apt-get install graphviz' or 'brew "
                          "install graphviz', or leave --renderer out: acc-host draws svg and "
                          "png itself)")
    try:
        done = subprocess.run([program, f"-T{form}"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise failure(f"Graphviz 'dot' ({program}) failed: {error}") from None
    if done.returncode != 0:
        raise failure(f"Graphviz 'dot' ({program}) failed with status {done.returncode}: "
                      f"{done.stderr.decode('utf-8', 'replace').strip()[:500]}")
    return done.stdout
