"""Pass / xfail / skip / fail counts of the ONNX backend test suite, per backend.

    python benchmarks/onnx_counts.py              # runs the suites, prints the table
    python benchmarks/onnx_counts.py --xml a.xml  # counts an existing junit xml
    python benchmarks/onnx_counts.py --suggest    # also prints failing cases as
                                                  # tests/support/onnx_expected_failures.py entries

The CPU path runs from tests/onnx/test_onnx_backend.py, cpu_ref from
tests/onnx/test_onnx_backend_cpu_ref.py, the simulated MLU (light models only, with CPU
fallback) from tests/onnx/test_onnx_backend_mlu.py. "node %" counts every node case (passed /
all node cases).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = {"cpu": "tests/onnx/test_onnx_backend.py",
          "cpu_ref": "tests/onnx/test_onnx_backend_cpu_ref.py",
          "mlu": "tests/onnx/test_onnx_backend_mlu.py"}
CATEGORIES = {"OnnxBackendNodeModelTest": "node", "OnnxBackendRealModelTest": "light models",
              "OnnxBackendSimpleModelTest": "simple", "OnnxBackendPyTorchConvertedModelTest":
              "pytorch-converted", "OnnxBackendPyTorchOperatorModelTest": "pytorch-operator"}


def run_suite(path: str, xml: str) -> None:
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path,
                    f"--junitxml={xml}"], cwd=ROOT, check=False, stdout=subprocess.DEVNULL,
                   env={**os.environ})


def outcomes(xml: str) -> list[tuple[str, str, str, str]]:
    """(category, test name, outcome, message) per test case."""
    rows = []
    for case in ET.parse(xml).iter("testcase"):
        classname = case.get("classname", "").rsplit(".", 1)[-1]
        classname = classname.removeprefix("CpuRef").removeprefix("Mlu")
        category = CATEGORIES.get(classname, "other")
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", child.get("message") or ""
            elif child.tag == "skipped":
                is_xfail = child.get("type") == "pytest.xfail" or "xfail" in (
                    child.get("message") or "").lower() or "expected failure" in (
                    child.get("message") or "").lower()
                outcome = "xfail" if is_xfail else "skipped"
                message = child.get("message") or ""
        rows.append((category, case.get("name", ""), outcome, message))
    return rows


def table(backend: str, rows: list[tuple[str, str, str, str]]) -> None:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for category, _, outcome, _ in rows:
        counts[category][outcome] += 1
        counts["all"][outcome] += 1
    print(f"\n{backend}")
    print(f"  {'category':<18} {'passed':>7} {'xfail':>7} {'skipped':>7} {'failed':>7} "
          f"{'total':>7}")
    for category in [*CATEGORIES.values(), "other", "all"]:
        if category not in counts:
            continue
        c = counts[category]
        total = sum(c.values())
        print(f"  {category:<18} {c['passed']:>7} {c['xfail']:>7} {c['skipped']:>7} "
              f"{c['failed']:>7} {total:>7}")
    node = counts.get("node")
    if node:
        print(f"  node cases passing: {node['passed']}/{sum(node.values())} "
              f"({100 * node['passed'] / sum(node.values()):.1f}%)")


def suggest(rows: list[tuple[str, str, str, str]]) -> None:
    for _, name, outcome, message in rows:
        if outcome != "failed":
            continue
        lines = [line.strip() for line in message.splitlines()[1:] if line.strip()]
        reason = "; ".join(lines) if "unsupported operator" in message else \
            message.splitlines()[0] if message else "fails"
        reason = re.sub(r"\s+", " ", reason)[:200]
        print(f"    {re.sub(r'_cpu$', '', name)!r}: {reason!r},")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xml", nargs="*", help="count existing junit xml files instead")
    parser.add_argument("--backend", choices=sorted(SUITES), nargs="*",
                        help="backends to run (default: all)")
    parser.add_argument("--suggest", action="store_true")
    args = parser.parse_args()
    if args.xml:
        for xml in args.xml:
            rows = outcomes(xml)
            table(xml, rows)
            if args.suggest:
                suggest(rows)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backend or list(SUITES):
            if not (ROOT / SUITES[backend]).exists():
                continue
            xml = os.path.join(tmp, f"{backend}.xml")
            run_suite(SUITES[backend], xml)
            rows = outcomes(xml)
            table(backend, rows)
            if args.suggest:
                suggest(rows)


if __name__ == "__main__":
    main()
