"""mxnet_acc.h: compiles as C99 and C++, and its cffi region is complete."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.paths import ROOT

from acc_host.abi import header

HEADER = ROOT / "include" / "mxnet_acc.h"
ABI_FUNCTIONS = ["getAccApiVersion", "initialize", "getAccName", "getNumAcc", "mx_alloc",
                 "mx_free", "mx_releaseAll", "copyToAcc", "copyFromAcc", "supportsImperative",
                 "accGetExecutor", "supportedOps", "loadModel", "unloadModel", "infer",
                 "configure", "accGetLastError", "supportedOpsReasons", "retainsWeights",
                 "supportsSparse"]


def _compile(tmp_path: Path, compiler: str, source: str, suffix: str, flags: list[str]) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    path = tmp_path / f"uses_header{suffix}"
    path.write_text(source)
    result = subprocess.run([compiler, *flags, f"-I{ROOT / 'include'}", "-c", str(path), "-o",
                             str(tmp_path / "out.o")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


USES_EVERYTHING = """
#include "mxnet_acc.h"
int main(void) {
  MXTensor tensor = {0};
  SparseTensor sparse = {0};
  RowSparseTensor row_sparse = {0};
  MXAccExecutor executor = {0};
  TensorDType dtype = kInt64;
  (void)tensor; (void)sparse; (void)row_sparse; (void)executor; (void)dtype;
  return MX_ACC_API_VERSION == 102 && MX_ACC_REASON_MAX == 128 ? MX_ACC_OK
                                                                 : MX_ACC_ERR_INTERNAL;
}
"""


def test_header_compiles_as_pedantic_c99(tmp_path: Path) -> None:
    _compile(tmp_path, "gcc", USES_EVERYTHING, ".c",
             ["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror"])


def test_header_compiles_as_cxx(tmp_path: Path) -> None:
    source = USES_EVERYTHING.replace("(void)dtype;", "(void)dtype; static_assert(true, \"\");")
    _compile(tmp_path, "g++", source.replace("= {0}", "= {}"), ".cpp",
             ["-std=c++11", "-Wall", "-Wextra", "-Wpedantic", "-Werror"])


def test_cxx_sees_c_linkage(tmp_path: Path) -> None:
    """Declarations compiled as C++ must produce unmangled symbol references."""
    if shutil.which("g++") is None or shutil.which("nm") is None:
        pytest.skip("g++ and nm are needed")
    source = '#include "mxnet_acc.h"\nint use(void) { return getNumAcc(); }\n'
    _compile(tmp_path, "g++", source, ".cpp", ["-std=c++11"])
    symbols = subprocess.run(["nm", str(tmp_path / "out.o")], capture_output=True,
                             text=True).stdout
    assert re.search(r"\bU getNumAcc\b", symbols)


def test_cffi_declarations_come_from_the_header() -> None:
    assert header.cdef_source(HEADER).strip()
    declared = {name for name in dir(header.dlopen(None))
                if not name.startswith(("MX_ACC_", "k"))}
    assert declared == set(ABI_FUNCTIONS)


def test_dtype_values_are_the_proposals() -> None:
    assert header.DTYPE_VALUES == {"kFloat32": 0, "kFloat64": 1, "kFloat16": 2, "kUint8": 3,
                                 "kInt32": 4, "kInt8": 5, "kInt64": 6}


def test_constants() -> None:
    assert header.API_VERSION == 102 and header.API_VERSION_MAJOR == 1
    assert header.API_VERSION_MINOR == 2 and header.REASON_MAX == 128
    assert header.HOST_DEVICE == -1
    assert header.status_name(0) == "MX_ACC_OK"
    assert header.status_name(2) == "MX_ACC_ERR_UNSUPPORTED"


def test_installed_header_copy_is_identical() -> None:
    assert header.header_path().read_bytes() == HEADER.read_bytes()
