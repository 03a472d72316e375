"""Rendering DOT to SVG with Graphviz's ``dot`` program."""

from __future__ import annotations

import shutil
import subprocess

from .errors import environment, failure

__all__ = ["DOT_PROGRAM", "to_svg"]

DOT_PROGRAM = "dot"
_TIMEOUT_S = 120


def to_svg(dot_text: str) -> str:
    """dot_text rendered by ``dot -Tsvg``; a CliError (exit 3) when Graphviz
    is not on PATH, (exit 1) when it fails."""
    program = shutil.which(DOT_PROGRAM)
    if program is None:
        raise environment("--format svg needs Graphviz: the 'dot' program is not on PATH "
                          "(install Graphviz, e.g. 'apt-get install graphviz' or 'brew install "
                          "graphviz', or use --format dot and render it elsewhere)")
    try:
        done = subprocess.run([program, "-Tsvg"], input=dot_text, capture_output=True,
                              text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise failure(f"Graphviz 'dot' ({program}) failed: {error}") from None
    if done.returncode != 0:
        raise failure(f"Graphviz 'dot' ({program}) failed with status {done.returncode}: "
                      f"{done.stderr.strip()[:500]}")
    return done.stdout
