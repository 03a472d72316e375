"""Captures MXNet 1.9.1's mx.viz.print_summary for the models in tests/models.

Runs in a side environment that has MXNet (it never imports acc_host)::

    mxenv/bin/python tools/mxnet_compat/make_viz_expected.py tests/mxnet_expected/viz

Writes MODEL.txt (with shapes: data (1, 3, 224, 224)) and MODEL-noshape.txt.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
MODELS = ("squeezenet1_1", "mobilenetv2_1_0")


def main() -> int:
    import mxnet as mx

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        symbol = mx.sym.load(str(ROOT / "tests" / "models" / name / "model-symbol.json"))
        for suffix, shape in (("", {"data": (1, 3, 224, 224)}), ("-noshape", None)):
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                mx.viz.print_summary(symbol, shape=shape)
            (out / f"{name}{suffix}.txt").write_text(text.getvalue(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
