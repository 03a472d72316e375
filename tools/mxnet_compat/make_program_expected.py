"""Runs the example programs of docs/examples under MXNet 1.9.1 and keeps
their output, for docs/mxnet_programs.md and its docs test.

Runs in a side environment that has MXNet (it never imports acc_host)::

    mxenv/bin/python tools/mxnet_compat/make_program_expected.py

Writes tests/mxnet_expected/programs/: a small classifier checkpoint
(classifier-symbol.json, classifier-0000.params, from fixed random
weights), evaluate_records.json and ndarray_script.json (the programs'
output with mx = mxnet on the CPU).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "tests" / "mxnet_expected" / "programs"
EXAMPLES = ROOT / "docs" / "examples"
REC = ROOT / "tests" / "mxnet_expected" / "imagerec" / "images.rec"


def main() -> int:
    import mxnet as mx

    OUT.mkdir(parents=True, exist_ok=True)
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), name="conv")
    pool = mx.sym.Pooling(mx.sym.Activation(conv, act_type="relu"), kernel=(2, 2),
                          stride=(2, 2), pool_type="max", name="pool")
    fc = mx.sym.FullyConnected(mx.sym.flatten(pool), num_hidden=8, name="fc")
    net = mx.sym.SoftmaxOutput(fc, name="softmax")
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=(2, 3, 8, 8))[0]))
    shapes.pop("softmax_label")
    rng = np.random.RandomState(9)
    params = {name: mx.nd.array(rng.standard_normal(shape).astype(np.float32) * 0.3)
              for name, shape in shapes.items() if name != "data"}
    mx.model.save_checkpoint(str(OUT / "classifier"), 0, net, params, {})
    for program, args in (("evaluate_records", [str(REC), str(OUT / "classifier")]),
                          ("ndarray_script", [])):
        done = subprocess.run([sys.executable, str(EXAMPLES / f"{program}.py"), "mxnet", "cpu",
                               *args], capture_output=True, text=True, check=True)
        (OUT / f"{program}.json").write_text(done.stdout.strip().splitlines()[-1] + "\n",
                                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
