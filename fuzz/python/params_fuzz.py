"""Fuzz target: the .params reader (acc_host.ndarray.params_file.loads, and
mx.model.load_params on top of it).

Allowed outcomes: the arrays and names (which must then survive a round
trip through dumps unchanged), or acc_host.errors.ModelFileError.
Everything else is a bug (harness.py). Seeds: fuzz/corpus/params/.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

with harness.instrumented():
    import numpy as np

    import acc_host as mx
    from acc_host.errors import InvalidArgumentError, ModelFileError
    from acc_host.ndarray import params_file


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        for x, y in zip(a, b))


def check(data: bytes) -> None:
    try:
        arrays, names = params_file.loads(data)
    except ModelFileError:
        return
    assert isinstance(arrays, list) and all(isinstance(a, np.ndarray) for a in arrays)
    assert len(names) in (0, len(arrays)) and all(isinstance(n, str) for n in names)
    for array in arrays:
        assert array.flags.c_contiguous and array.flags.writeable and array.flags.aligned
    # What was read can be written, and reads back the same; except names
    # that repeat, which a reader takes (the last wins, with a warning) and
    # acc_host refuses to write.
    if len(set(names)) < len(names):
        try:
            params_file.dumps(arrays, names)
        except InvalidArgumentError:
            pass
        else:
            raise AssertionError("dumps wrote names that repeat")
    else:
        again, again_names = params_file.loads(params_file.dumps(arrays, names))
        assert _same(arrays, again) and again_names == names
    try:
        mx.model.load_params(data)
    except ModelFileError:
        pass


if __name__ == "__main__":
    sys.exit(harness.main(check))
