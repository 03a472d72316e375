"""``import acc_host`` imports what every inference needs and discovers the
plugins; the rest of MXNet's API (Gluon, Module, metrics, images, ONNX) is
imported on first use, and the ``onnx`` package only when a model is read.
Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Not imported by ``import acc_host`` (the first-inference budget).
LAZY = ["acc_host.gluon", "acc_host.module", "acc_host.metric", "acc_host.image",
        "acc_host.recordio", "acc_host.visualization", "acc_host.test_utils",
        "acc_host.contrib", "acc_host.onnx", "acc_host.io", "acc_host.model",
        "acc_host.initializer", "onnx", "onnxruntime", "google.protobuf", "ml_dtypes",
        "matplotlib", "scipy", "PIL"]


def _modules(code: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_import_pulls_in_no_optional_part() -> None:
    loaded = _modules("import acc_host")
    assert not sorted(name for name in LAZY if name in loaded)
    # what it does import: the plugins, discovered and loaded
    assert {"acc_host.plugins.discovery", "acc_host.runtime.executor", "acc_host.symbol"} <= loaded


@pytest.mark.parametrize("attribute,module", [
    ("gluon", "acc_host.gluon"), ("mod", "acc_host.module"), ("viz", "acc_host.visualization"),
    ("init", "acc_host.initializer"), ("onnx", "acc_host.onnx"), ("model", "acc_host.model")])
def test_lazy_attribute_imports_its_module(attribute: str, module: str) -> None:
    loaded = _modules(f"import acc_host as mx\nassert mx.{attribute}.__name__ == {module!r}")
    assert module in loaded


def test_onnx_package_waits_for_a_model() -> None:
    pytest.importorskip("onnx")
    loaded = _modules("import acc_host as mx\nmx.onnx\nfrom acc_host.onnx import importer")
    assert "acc_host.onnx.importer" in loaded and "onnx" not in loaded


def test_public_names_all_resolve() -> None:
    import acc_host as mx

    missing = [name for name in mx.__all__ if not hasattr(mx, name)]
    assert not missing
    assert set(mx.__all__) <= set(dir(mx))
    assert mx.sym.contrib.foreach is not None and mx.nd.random is not None


def test_onnx_file_prepares_and_runs_without_the_onnx_package() -> None:
    """The backend reads a model file with acc_host.onnx.reader: preparing
    and running it imports neither onnx nor protobuf (nor ml_dtypes)."""
    from support.paths import ONNX_MODELS

    path = ONNX_MODELS / "resnet_small.onnx"
    loaded = _modules(
        "import numpy as np\n"
        "from acc_host.onnx import backend\n"
        f"rep = backend.prepare({str(path)!r}, accelerator='cpu_ref')\n"
        "shape = [d if d > 0 else 1 for d in rep.imported.input_shapes[rep.input_names[0]]]\n"
        "out = rep.run([np.zeros(shape, np.float32)])\n"
        "assert out[0].size > 0")
    assert "acc_host.onnx.backend" in loaded
    assert not {"onnx", "google.protobuf", "ml_dtypes"} & loaded
