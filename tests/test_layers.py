"""The host's layers (docs/architecture.md, "The pieces") as import-linter
contracts in pyproject.toml: every contract is kept, and the checks a
contract cannot state hold too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

importlinter = pytest.importorskip(
    "importlinter", reason="import-linter is not installed (pip install -e '.[test]')")


def test_contracts_are_kept() -> None:
    beside = Path(sys.executable).with_name("lint-imports")  # the running environment's
    command = str(beside) if beside.exists() else shutil.which("lint-imports")
    if command is None:
        pytest.skip("import-linter's lint-imports command is not on PATH")
    result = subprocess.run([command, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
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
