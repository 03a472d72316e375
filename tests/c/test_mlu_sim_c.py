"""tests/c/test_mlu_cnml.c: the CNML/CNRT-like layer of plugins/mlu_sim
linked directly and run under AddressSanitizer, LeakSanitizer and
UndefinedBehaviorSanitizer: tensors, device buffers only after compile,
numerics of every BaseOp, batch-norm folding and epilogue fusion, tiling into
a tiny on-chip memory, fp16 storage, queue FIFO order, parallel queues,
errors at sync and out-of-memory errors; then the plugin's mxnet_acc.h entry
points on top of it (load/infer/unload, executor and memory cycles) with
LeakSanitizer watching."""

from pathlib import Path

import pytest
from support.c_programs import ROOT, build_and_run


@pytest.mark.sanitizer
def test_mlu_cnml_layer_is_correct_and_clean(tmp_path: Path) -> None:
    sources = [str(path.relative_to(ROOT)) for directory in ("plugins/mlu_sim", "plugins/common")
               for path in sorted((ROOT / directory).glob("*.c"))]
    report = build_and_run(["tests/c/test_mlu_cnml.c", *sources], tmp_path / "test_mlu_cnml",
                           ["include", "plugins/common", "plugins/mlu_sim"])
    print(report)
