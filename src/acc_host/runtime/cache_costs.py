"""Whether the compiled-model cache pays for a subgraph: what a start cost
through the cache and by compiling, remembered per graph.

A warm start through the cache costs the key (every weight read and
hashed, copied off the device first where it lives there), the check of
the entry's contents and the plugin's import; a cold one costs the
plugin's compile. For a plugin whose compile is little more than copying
and packing the weights (cpu_ref), the first can cost more than the
second: ResNet-50 v1 on cpu_ref, key and check 0.36 s and import 0.39 s
against a compile of 0.30 s. The cache records, beside its entries, the
seconds of the latest compile and of the latest start through the cache
of each graph (``<graph key>.cost``: the plugin's identity, its
compile settings and the annotated graph, not the weights); when a start
through the cache took more than the compile plus ``MARGIN_SECONDS``, the
subgraph is compiled without the cache from then on (neither keyed nor
exported). The margin keeps small models, where both take milliseconds
and the noise decides, in the cache.

A record only ever decides to compile: it cannot make an entry be used,
so a planted or damaged record costs time, never a stale model. Records
are read only from a directory the cache trusts, and only when they are
regular files of the user's (or root's) that group and others cannot
write; anything else is ignored.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["MARGIN_SECONDS", "CostRecord"]

MARGIN_SECONDS = 0.05


class CostRecord:
    """The record of one graph in a cache directory."""

    def __init__(self, directory: Path, graph_key: str) -> None:
        self.path = directory / f"{graph_key}.cost"

    def _read(self) -> dict[str, float]:
        try:
            status = self.path.lstat()
            if not stat.S_ISREG(status.st_mode) or status.st_uid not in (0, os.geteuid()) or \
                    status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return {}
            loaded = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(loaded, dict):
            return {}
        return {name: float(value) for name, value in loaded.items()
                if name in ("compile_s", "cache_s") and isinstance(value, (int, float))
                and math.isfinite(value) and value >= 0}

    def cache_pays(self) -> bool:
        """False when the latest start through the cache took more than the
        latest compile plus MARGIN_SECONDS; True otherwise (or unknown)."""
        seconds = self._read()
        if "compile_s" not in seconds or "cache_s" not in seconds:
            return True
        return seconds["cache_s"] <= seconds["compile_s"] + MARGIN_SECONDS

    def record(self, **seconds: float) -> None:
        """Stores compile_s and/or cache_s (best effort: the cache is an
        optimisation)."""
        merged = {**self._read(), **seconds}
        try:
            handle, name = tempfile.mkstemp(prefix=f".meta-{os.getpid()}-",
                                            dir=self.path.parent)
            with os.fdopen(handle, "w") as stream:
                stream.write(json.dumps(merged, sort_keys=True))
            os.replace(name, self.path)
        except OSError:
            pass
