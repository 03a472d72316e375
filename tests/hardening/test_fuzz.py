"""The fuzz targets of fuzz/ (docs/fuzzing.md, whose commands these tests
run with shorter times), bounded.

For every target: the committed corpus (fuzz/corpus/<target>/, seeds made
from real inputs) and the regressions (fuzz/regressions/<target>/, the
inputs of the bugs the fuzzers found, now fixed) run once, then a short
fuzzing session (FUZZ_SECONDS each, default 5) must find nothing. The C
targets need clang's libFuzzer (skipped without it); the Python targets run
under atheris when installed, else under fuzz/python/harness.py's mutational
driver. Besides, hypothesis drives the Python targets' check functions in
this process with mutations of their seeds, and each bug found and fixed
has a test of its own here, with the error it now raises.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import ROOT

import acc_host as mx

sys.path.insert(0, str(ROOT / "fuzz"))
sys.path.insert(0, str(ROOT / "fuzz" / "python"))

import run as fuzz_run  # noqa: E402  (fuzz/run.py)

SECONDS = float(os.environ.get("FUZZ_SECONDS", "3"))
C_TARGETS = [name for name, t in fuzz_run.TARGETS.items() if t.kind == "c"]
PY_TARGETS = [pytest.param(name, marks=[pytest.mark.needs_onnx] if name == "onnx" else [])
              for name, t in fuzz_run.TARGETS.items() if t.kind == "python"]


@pytest.fixture(scope="module")
def libfuzzer() -> None:
    problem = fuzz_run.libfuzzer_available()
    if problem is not None:
        pytest.skip(problem)


def _check(result: fuzz_run.Result) -> None:
    print(fuzz_run.summary([result]))
    assert result.ok, f"{result.target}: exit {result.returncode}, {result.artifacts}\n" \
                      f"{result.log_tail}"


def test_command_line_as_documented(tmp_path: Path) -> None:
    """docs/fuzzing.md's commands: list, and run with targets named (one
    second here)."""
    import subprocess
    listed = subprocess.run([sys.executable, str(ROOT / "fuzz" / "run.py"), "list"],
                            capture_output=True, text=True, check=True).stdout
    assert [line.split()[0] for line in listed.splitlines()] == list(fuzz_run.TARGETS)
    result = subprocess.run([sys.executable, str(ROOT / "fuzz" / "run.py"), "run", "--seconds",
                             "1", "params", "--json", str(tmp_path / "results.json"),
                             "--work", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].split()[:3] == ["target", "driver", "seconds"]
    import json
    (figures,) = json.loads((tmp_path / "results.json").read_text())
    assert figures["target"] == "params" and figures["executions"] > 0


def test_every_target_has_seeds() -> None:
    for name in fuzz_run.TARGETS:
        seeds = list((ROOT / "fuzz" / "corpus" / name).iterdir())
        assert seeds, name
        assert sum(p.stat().st_size for p in seeds) < 256 * 1024, f"{name}: keep the seeds small"


# The default run replays these C targets; the others' sanitized builds take
# about 20 s each on a fresh checkout, so they replay in the full run only.
DEFAULT_C_REPLAYS = ("graph_json", "cpu_ref_model")


@pytest.mark.parametrize("target", [
    pytest.param(name, marks=[] if name in DEFAULT_C_REPLAYS else [pytest.mark.fuzz])
    for name in C_TARGETS])
def test_c_target_replays_corpus_and_regressions(libfuzzer, target: str) -> None:
    _check(fuzz_run.run(fuzz_run.TARGETS[target], 0, replay=True))


@pytest.mark.fuzz
@pytest.mark.parametrize("target", C_TARGETS)
def test_c_target_bounded_session(libfuzzer, target: str, tmp_path: Path) -> None:
    _check(fuzz_run.run(fuzz_run.TARGETS[target], SECONDS, work=tmp_path))


@pytest.mark.parametrize("target", PY_TARGETS)
def test_python_target_replays_corpus_and_regressions(target: str) -> None:
    _check(fuzz_run.run(fuzz_run.TARGETS[target], 0, replay=True))


@pytest.mark.parametrize("target", [  # the default run: one session
    pytest.param(*param.values, marks=[*param.marks, *([] if param.values == ("params",) else [
        pytest.mark.fuzz])]) for param in PY_TARGETS])
def test_python_target_bounded_session(target: str, tmp_path: Path) -> None:
    _check(fuzz_run.run(fuzz_run.TARGETS[target], SECONDS, work=tmp_path))


@pytest.mark.fuzz
def test_a_session_started_from_a_large_process_has_a_memory_peak_of_its_own(
        libfuzzer, tmp_path: Path) -> None:
    """Linux carries a process's peak RSS across fork and exec, and
    libFuzzer's -rss_limit_mb reads that peak. Run from pytest late in a
    long session (4.6 GB resident, the suite's files in reverse order),
    every bounded session stopped at once with "out-of-memory (used:
    4661Mb)". Here a process holding 1.2 GB runs a session with a limit of
    1 GB: it must run to its end."""
    import subprocess
    import textwrap
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT / "fuzz")!r})
        import run as fuzz_run
        ballast = bytearray(1200 << 20)
        for page in range(0, len(ballast), 4096):
            ballast[page] = 1
        fuzz_run.RSS_LIMIT_MB = 1024
        result = fuzz_run.run(fuzz_run.TARGETS["graph_json"], 2, work=Path({str(tmp_path)!r}))
        print(result.returncode, result.peak_rss_mb, result.artifacts, result.log_tail)
        sys.exit(0 if result.ok else 1)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]


# ---- hypothesis over the Python targets' check functions ---------------------------------------


def _seeds(target: str) -> list[bytes]:
    folders = [ROOT / "fuzz" / kind / target for kind in ("corpus", "regressions")]
    return [p.read_bytes() for folder in folders if folder.is_dir()
            for p in sorted(folder.iterdir())]


_EXTREMES = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63,
             (1 << 64) - 1]


@st.composite
def mutated(draw, seeds: list[bytes]) -> bytes:
    """A seed with a few bit flips, byte changes, insertions, deletions and
    little-endian integers overwritten with extreme values."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.integers(0, 4))
        pos = draw(st.integers(0, len(data)))
        if kind == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        elif kind == 1 and data:
            data[min(pos, len(data) - 1)] = draw(st.integers(0, 255))
        elif kind == 2:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif kind == 3:
            del data[pos:pos + draw(st.integers(1, 64))]
        else:
            width = draw(st.sampled_from([1, 2, 4, 8]))
            value = draw(st.sampled_from(_EXTREMES)) & ((1 << (8 * width)) - 1)
            data[pos:pos + width] = struct.pack("<Q", value)[:width]
    return bytes(data)


_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))


@_SETTINGS
@given(data=mutated(_seeds("params")))
def test_params_reader_under_hypothesis(data: bytes) -> None:
    import params_fuzz
    params_fuzz.check(data)


@_SETTINGS
@given(data=mutated(_seeds("symbol_json")))
def test_symbol_json_loader_under_hypothesis(data: bytes) -> None:
    import symbol_json_fuzz
    symbol_json_fuzz.check(data)


@pytest.mark.needs_onnx
@settings(_SETTINGS, max_examples=60)
@given(data=st.one_of(mutated(_seeds("onnx")),
                      st.binary(min_size=2, max_size=200).filter(lambda b: b[0] != 0x08)))
def test_onnx_importer_under_hypothesis(data: bytes) -> None:
    import onnx_fuzz
    onnx_fuzz.check(data)


# ---- the bugs the fuzzers found, fixed -----------------------------------------------------------


def test_symbol_file_not_utf8_is_a_graph_error(tmp_path: Path) -> None:
    path = tmp_path / "bad-symbol.json"
    path.write_bytes(b'{"nodes": [\xff]}')
    with pytest.raises(mx.GraphError, match="not UTF-8 text: invalid start byte at byte "
                                            "offset 11"):
        mx.sym.load(path)


def _onnx_model(nodes, inputs, outputs, initializers=()):
    pytest.importorskip("onnx")
    from onnx import helper
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.needs_onnx
def test_onnx_output_produced_by_no_node_is_a_graph_error() -> None:
    from onnx import TensorProto, helper
    vi = helper.make_tensor_value_info
    model = _onnx_model([helper.make_node("Relu", ["x"], ["r"])], [vi("x", TensorProto.FLOAT, [2])],
                        [vi("y", TensorProto.FLOAT, [2])])
    with pytest.raises(mx.GraphError, match="graph output 0 \\('y'\\) is produced by no node"):
        mx.onnx.import_model(model)


@pytest.mark.needs_onnx
def test_onnx_malformed_node_is_an_operator_error() -> None:
    """Constant folding of a Gather whose constant index is out of range."""
    from onnx import TensorProto, helper, numpy_helper
    vi = helper.make_tensor_value_info
    model = _onnx_model(
        [helper.make_node("Gather", ["table", "index"], ["y"], axis=0)], [],
        [vi("y", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.arange(3, dtype=np.float32), "table"),
         numpy_helper.from_array(np.array([256], np.int64), "index")])
    with pytest.raises(mx.OperatorError, match=r"_onnx_gather: .*256.* out of range"):
        mx.onnx.import_model(model)


def test_symbol_names_with_control_characters_round_trip() -> None:
    """tojson wrote control characters other than \\n, \\r and \\t raw, which
    JSON does not allow: the JSON of such a symbol did not load back."""
    x = mx.sym.Variable("da\x01ta\x00\x1f")
    symbol = mx.sym.Activation(x, act_type="relu", name="act\x7f")
    text = symbol.tojson()
    assert "\\u0001" in text and "\\u0000" in text and "\\u001f" in text
    again = mx.sym.load_json(text)
    assert again.tojson() == text and again.list_arguments() == ["da\x01ta\x00\x1f"]
