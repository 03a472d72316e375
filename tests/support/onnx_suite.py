"""The official ONNX backend test suite (onnx.backend.test) as pytest
classes: build_suite makes the classes of one backend with the expected
failures marked and the default run's sample chosen (the suites of
onnx/test_onnx_backend*.py). Imports onnx: a test module imports this after
its pytest.importorskip("onnx")."""

from __future__ import annotations

import re

import onnx.backend.test
import onnx.backend.test.loader
import pytest

__all__ = ["DEFAULT_REAL_MODELS", "NODE_SAMPLE", "build_suite"]

NODE_SAMPLE = 2
DEFAULT_REAL_MODELS = ("test_inception_v1", "test_shufflenet")


def node_operators() -> dict[str, str]:
    """Node case name -> the operator it tests: the op_type of its one node,
    or for an expanded case (the operator's function body, several nodes)
    that of the case it expands."""
    cases = onnx.backend.test.loader.load_model_tests(kind="node")
    operators: dict[str, str] = {}
    for case in cases:
        types = {node.op_type for node in case.model.graph.node}
        if len(types) == 1:
            operators[case.name] = types.pop()
    for case in cases:
        if case.name not in operators:
            operators[case.name] = operators.get(
                re.sub(r"_expanded.*$", "", case.name),
                "+".join(sorted({node.op_type for node in case.model.graph.node})))
    return operators


def default_sample(expected: dict[str, str]) -> set[str]:
    """The node cases the default run keeps: per operator, the first
    NODE_SAMPLE by name that are expected to pass."""
    per_operator: dict[str, list[str]] = {}
    for case, operator in sorted(node_operators().items()):
        if case not in expected:
            per_operator.setdefault(operator, []).append(case)
    return {case for cases in per_operator.values() for case in cases[:NODE_SAMPLE]}


def in_default_run(category: str, case: str, index: int, node_sample: set[str]) -> bool:
    """Whether the default run keeps case (its name without "_cpu"), the
    index-th of its unittest class."""
    if category.endswith("NodeModelTest"):
        return case in node_sample
    if category.endswith("RealModelTest"):
        return case in DEFAULT_REAL_MODELS
    if category.endswith("PyTorchConvertedModelTest"):
        return index % 3 == 0
    return True


def build_suite(backend: type, name: str, expected: dict[str, str],
                include: str | None = None) -> dict[str, type]:
    """The suite's unittest classes for backend, "_cpu" variants only (acc-host's
    backend serves the ONNX device "CPU"; accelerators are picked with its
    accelerator option, so the generated "_cuda" variants are dropped), with
    every case of expected marked xfail(strict) with its reason, and the
    cases outside the default run's sample marked onnx_full. With include
    (a regular expression), only the matching cases are generated: the others
    are left out, not skipped."""
    suite = onnx.backend.test.BackendTest(backend, name)
    cases = suite.test_cases  # a property that builds new classes on every access
    node_sample = default_sample(expected)
    for category, case in cases.items():
        kept = 0
        for attr in sorted(vars(case)):
            if not attr.startswith("test_"):
                continue
            if not attr.endswith("_cpu") or (include and not re.search(include, attr)):
                delattr(case, attr)
                continue
            function = getattr(case, attr)
            reason = expected.get(attr[: -len("_cpu")])
            if reason is not None:
                strict = not reason.startswith(("flaky:", "machine:"))
                function = pytest.mark.xfail(reason=reason, strict=strict)(function)
            if reason is not None or not in_default_run(category, attr[: -len("_cpu")], kept,
                                                        node_sample):
                function = pytest.mark.onnx_full(function)
            kept += 1
            setattr(case, attr, function)
    return cases
