"""The host's layers (docs/architecture.md, "The pieces") as import-linter
contracts in pyproject.toml: every contract is kept, and the checks a
contract cannot state hold too."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.paths import ROOT

importlinter = pytest.importorskip(
    "importlinter", reason="import-linter is not installed (pip install -e '.[test]')")


def test_contracts_are_kept() -> None:
    # This interpreter runs import-linter, so the acc_host it analyses is the
    # one under test (a lint-imports script of another environment would
    # analyse that environment's acc_host).
    command = [sys.executable, "-c",
               "import sys; from importlinter.cli import lint_imports_command; "
               "sys.exit(lint_imports_command())", "--no-cache"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_dispatch_does_not_import_its_package() -> None:
    """ndarray.dispatch works on operands and device buffers; the NDArray
    class (acc_host.ndarray's own module) calls it, never the reverse. A
    forbidden contract cannot name a package's __init__ from inside it."""
    import grimp

    graph = grimp.build_graph("acc_host", exclude_type_checking_imports=True)
    assert not graph.direct_import_exists(importer="acc_host.ndarray.dispatch",
                                          imported="acc_host.ndarray")


PACKAGE = ROOT / "src" / "acc_host"
ABI = PACKAGE / "abi"


def _cffi_uses(source: str, filename: str) -> list[str]:
    """Where a module touches cffi or a plugin's cffi library: imports of
    cffi, of ``ffi``/``lib`` (from acc_host.abi.header or anywhere), an
    ``.ffi`` attribute, or a ``<x>.lib.<entry>`` chain (numpy's np.lib
    aside)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source, filename)):
        line = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{line}: import {alias.name}" for alias in node.names
                      if alias.name.split(".")[0] == "cffi"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] == "cffi":
                found.append(f"{line}: from {module} import ...")
            found += [f"{line}: from {module} import {alias.name}" for alias in node.names
                      if alias.name in ("ffi", "lib")]
        elif isinstance(node, ast.Attribute):
            if node.attr == "ffi":
                found.append(f"{line}: .ffi")
            inner = node.value
            if (isinstance(inner, ast.Attribute) and inner.attr == "lib"
                    and not (isinstance(inner.value, ast.Name)
                             and inner.value.id in ("np", "numpy"))):
                found.append(f"{line}: .lib.{node.attr}")
    return found


def test_only_abi_touches_cffi() -> None:
    """One cffi chokepoint: outside acc_host/abi/ no module imports cffi or
    its ffi, nor calls a plugin's entry points through ``.lib.``; they go
    through AccLibrary.call (or its documented unchecked call) and
    acc_host.abi.cdata. import-linter's contract checks the cffi import;
    this checks the names too."""
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if ABI not in path.parents]
    assert len(modules) > 100
    found = [use for path in modules
             for use in _cffi_uses(path.read_text(encoding="utf-8"),
                                   str(path.relative_to(PACKAGE)))]
    assert found == []


@pytest.mark.parametrize("source", [
    "import cffi\n", "from cffi import FFI\n", "from ..abi.header import ffi\n",
    "from acc_host.abi.header import ffi, lib\n", "x = abi.ffi.NULL\n",
    "status = library.lib.infer(model)\n"])
def test_the_cffi_scan_sees(source: str) -> None:
    assert _cffi_uses(source, "m.py")


def test_the_cffi_scan_passes_numpy_lib() -> None:
    assert _cffi_uses("from numpy.lib.stride_tricks import sliding_window_view\n"
                      "y = np.lib.NumpyVersion(v)\nargs.lib\n", "m.py") == []
