"""The layout of tests/ (docs/architecture.md, "Where tests live"): test
modules in folders by layer, what they share in the support package, and no
test module importing another (or conftest.py): a test module's top level
runs at collection, and importing one from another ran, and re-collected,
its module-level setup in a second place."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from support.paths import TESTS

# Folders of test data (and the scripts that make it), not of tests.
DATA = ("models", "onnx_models", "mxnet_expected")


def _python_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py")
                  if path.relative_to(TESTS).parts[0] not in DATA)


def _test_modules() -> list[Path]:
    return [path for path in _python_files() if path.name.startswith("test_")]


def _imported(path: Path) -> set[str]:
    """The top-level names of the modules path imports, anywhere in it
    (function-local imports and importlib.import_module("name") included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value.split(".")[0])
    return names


def test_no_test_module_imports_another_or_conftest() -> None:
    test_modules = {path.stem for path in _test_modules()}
    offenders = {str(path.relative_to(TESTS)): sorted(names)
                 for path in _python_files()
                 if (names := _imported(path) & (test_modules | {"conftest"}))}
    assert not offenders, f"import from support/ instead: {offenders}"


def test_test_modules_live_in_layer_folders_with_unique_names() -> None:
    modules = _test_modules()
    assert len(modules) > 50
    top = [path.name for path in modules if path.parent == TESTS]
    assert not top, f"put these in the folder of their layer: {top}"
    # pytest imports test modules by their base name (no __init__.py files)
    twice = [name for name, count in Counter(path.name for path in modules).items()
             if count > 1]
    assert not twice, f"test module names must be unique across folders: {twice}"
    assert not [path for path in modules if path.relative_to(TESTS).parts[0] == "support"]


def test_shared_code_lives_in_the_support_package() -> None:
    """Every Python file of tests/ outside the data folders is a test
    module, a conftest.py, or a module of support/."""
    loose = [str(path.relative_to(TESTS)) for path in _python_files()
             if not path.name.startswith("test_") and path.name != "conftest.py"
             and path.relative_to(TESTS).parts[0] != "support"]
    assert not loose, f"move shared code into tests/support/: {loose}"


# Private members with a public observation: the executor's steps and bound
# steps (Executor.plan, .subgraphs, .bound_step), a Module's and an ONNX
# backend rep's executor (.executor), a subgraph's model (.model) and a
# Module's label shapes (.label_shapes).
OBSERVABLE = {"_steps", "_bound_steps", "_subgraphs", "_exec", "_executor", "_model",
              "_label_shapes"}


def test_tests_observe_through_public_members() -> None:
    """Tests and benchmarks read these through their public accessors, not
    through private attributes (self's own excepted)."""
    files = [*_test_modules(), *(TESTS / "support").glob("*.py"),
             *(TESTS.parent / "benchmarks").glob("*.py")]
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in OBSERVABLE
                    and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
                found.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}: .{node.attr}")
    assert not found, found
