"""Packs the PNG images of tests/mxnet_expected/imagerec into a .rec file
and records MXNet 1.9.1's ImageRecordIter batches over it.

Runs in a side environment that has MXNet (it never imports acc_host)::

    mxenv/bin/python tools/mxnet_compat/make_imagerec_expected.py \\
        tests/mxnet_expected/imagerec

images.rec: record k is pack(IRHeader(0, k * 1.5, k, 0), bytes of imgk.png).
CASE_k.npz: the data, label and pad of every batch of ITERATORS[k].
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ITERATORS = [
    {"data_shape": (3, 8, 8), "batch_size": 2},
    {"data_shape": (3, 9, 9), "batch_size": 3, "mean_r": 123.0, "mean_g": 117.0,
     "mean_b": 104.0, "std_r": 58.0, "std_g": 57.0, "std_b": 57.5, "scale": 0.5},
    {"data_shape": (1, 6, 7), "batch_size": 5},
]


def main() -> int:
    import mxnet as mx

    folder = Path(sys.argv[1])
    images = sorted(folder.glob("img*.png"))
    writer = mx.recordio.MXRecordIO(str(folder / "images.rec"), "w")
    for k, path in enumerate(images):
        writer.write(mx.recordio.pack(mx.recordio.IRHeader(0, k * 1.5, k, 0),
                                      path.read_bytes()))
    writer.close()
    for k, kwargs in enumerate(ITERATORS):
        it = mx.io.ImageRecordIter(path_imgrec=str(folder / "images.rec"), **kwargs)
        arrays = {}
        for b, batch in enumerate(it):
            arrays[f"data{b}"] = batch.data[0].asnumpy()
            arrays[f"label{b}"] = batch.label[0].asnumpy()
            arrays[f"pad{b}"] = np.array(batch.pad)
        np.savez(folder / f"case{k}.npz", **arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main())
