"""The sharper conformance kit: each deliberately broken build of
tests/plugins/conformance_acc.c that the issue names is caught by
``acc-host check`` with a message naming the bug, and the good builds (and
the bundled plugins) still conform.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from acc_host.cli import main
from acc_host.conformance import FAIL, PASS, check_library


@pytest.fixture(scope="module")
def confacc(build_test_plugin) -> Callable[..., Path]:
    """confacc(label, MACRO=value, ...): a build of conformance_acc.c."""
    def build(label: str = "good", **macros: object) -> Path:
        return build_test_plugin("conformance_acc.c", f"kit_{label}", **macros)
    return build


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """acc-host check ARGS: its exit status and what it printed."""
    status = main(["check", *args])
    return status, capsys.readouterr().out


def _failing(output: str) -> dict[str, str]:
    """FAIL lines of a text report by check id (the detail with any
    continuation lines)."""
    failing: dict[str, str] = {}
    current = None
    for line in output.splitlines():
        if line.startswith(("PASS", "FAIL", "SKIP")):
            status, check_id, *detail = line.split(None, 2)
            current = check_id if status == FAIL else None
            if current:
                failing[current] = detail[0] if detail else ""
        elif current and line.startswith(" "):
            failing[current] += "\n" + line.strip()
    return failing


def test_nan_swallowed_by_relu(confacc, capsys) -> None:
    status, output = _check(capsys, str(confacc("nan_relu", CONF_NAN_TO_ZERO_RELU=True)))
    assert status == 1, output
    failing = _failing(output)
    assert set(failing) == {"symbolic.nonfinite"}, output
    detail = failing["symbolic.nonfinite"]
    assert "Activation(act_type=relu) float32" in detail and "NaN swallowed" in detail
    assert "came back as numbers (e.g. 0 at" in detail


def test_the_good_relu_keeps_nan(confacc) -> None:
    report = check_library(confacc(), only=["symbolic.nonfinite"], isolate=False)
    (result,) = report.results
    assert result.status == PASS and "NaN and Inf where the CPU path has them" in result.detail


def test_scratch_shared_across_devices(confacc, capsys) -> None:
    """The scratch buffer is shared for a busy 20 us per call, and held on
    until another device's call writes it once the devices are driven from
    several threads: caught whatever the load (a busy window alone is seen
    only when two cores are free at that moment; docs/conformance.md)."""
    library = confacc("scratch_20us", CONF_SHARED_SCRATCH=True, CONF_SCRATCH_NS=20000)
    status, output = _check(capsys, str(library))
    assert status == 1, output
    failing = _failing(output)
    assert set(failing) == {"threads.concurrent"}, output
    assert "calls overlapping across devices" in failing["threads.concurrent"]
    assert "scratch buffer" in failing["threads.concurrent"]


def test_claimed_but_declined_dtypes(confacc, capsys) -> None:
    status, output = _check(capsys, str(confacc("claims", CONF_CLAIMS_ALL_FLOATS=True)))
    assert status == 1, output
    failing = _failing(output)
    assert set(failing) == {f"symbolic.numerics.{op}.{dtype}" for op in
                            ("Activation", "elemwise_add") for dtype in ("float16", "float64")}
    detail = failing["symbolic.numerics.Activation.float16"]
    assert "supportedOps claims Activation in float16, but loadModel declines it" in detail
    assert "float16 claimed but declined" in detail
    assert "does NOT conform" in output.splitlines()[-1]


def test_convolution_dropping_its_bias(confacc, capsys) -> None:
    good = check_library(confacc("conv", CONF_WITH_CONV=True), isolate=False)
    assert good.passed, good.format_text()
    assert good.by_id()["symbolic.numerics.Convolution.float32"].status == PASS
    status, output = _check(capsys, str(confacc("conv_no_bias", CONF_WITH_CONV=True,
                                                CONF_CONV_DROPS_BIAS=True)))
    assert status == 1, output
    failing = _failing(output)
    # weight_update runs the convolution too (the first claimed case with weights)
    assert set(failing) == {"symbolic.numerics.Convolution.float32", "symbolic.weight_update"}
    assert "the plugin drops the bias" in failing["symbolic.numerics.Convolution.float32"]


def test_output_overrun_caught_by_guard_bytes(confacc, capsys) -> None:
    """Without a sanitizer, the isolated checks run with the host's guard
    bytes around every output (MXNET_ACC_CHECK_OUTPUTS)."""
    from acc_host.conformance.crash_report import is_sanitized

    library = confacc("overrun", CONF_OUTPUT_OVERRUN=True)
    status, output = _check(capsys, str(library), "--only", "symbolic.numerics.*")
    assert status == 1, output
    detail = _failing(output)["symbolic.numerics.Activation.float32"]
    if is_sanitized(str(library)):  # a sanitized test session (ACC_HOST_SANITIZE=1)
        assert "ERROR: AddressSanitizer: heap-buffer-overflow" in detail
    else:
        assert "wrote past the end of output 'node_output'" in detail
        assert "buffer overrun" in detail


@pytest.fixture(scope="module")
def sanitized_overrun(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """conformance_acc.c with CONF_OUTPUT_OVERRUN, built with AddressSanitizer
    and UndefinedBehaviorSanitizer."""
    import build_plugins
    from acc_host.conformance.crash_report import sanitizer_runtimes

    output = tmp_path_factory.mktemp("kit_asan") / build_plugins.library_name("kit_overrun_asan")
    try:
        build_plugins.compile_library(
            [Path(__file__).resolve().parent.parent / "plugins" / "conformance_acc.c",
             *sorted(build_plugins.COMMON_DIR.glob("*.c"))], output, sanitize=True,
            werror=True, extra_flags=["-DCONF_OUTPUT_OVERRUN"])
    except build_plugins.BuildError as error:
        pytest.skip(f"this compiler cannot build with the sanitizers: {error}")
    if not sanitizer_runtimes(str(output)):
        pytest.skip("ldd does not find the sanitizer runtimes of the build")
    return output


def test_output_overrun_shows_the_first_sanitizer_report(sanitized_overrun: Path,
                                                         capsys) -> None:
    """A library built with AddressSanitizer gets its runtimes preloaded in
    the checking process; the crash's first report and the plugin's frames
    are the check's detail."""
    library = sanitized_overrun
    status, output = _check(capsys, str(library), "--only", "symbolic.numerics.Activation.*")
    assert status == 1, output
    detail = _failing(output)["symbolic.numerics.Activation.float32"]
    lines = detail.splitlines()
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in lines[1], detail
    assert lines[2].startswith("WRITE of size 16"), detail
    assert any("in write_output" in line and "conformance_acc.c:" in line for line in lines)
    assert any("in infer " in line for line in lines)
    assert any("frames of the host" in line for line in lines)
    assert "is located 0 bytes" in detail


def test_bundled_plugins_pass_the_new_checks() -> None:
    import acc_host

    bundled = Path(acc_host.__file__).resolve().parent / "_bundled"
    for name in ("libcpu_ref.so", "libmlu_sim.so"):
        report = check_library(bundled / name, only=["symbolic.nonfinite", "threads.concurrent"],
                               isolate=False)
        assert [result.status for result in report.results] == [PASS, PASS], \
            report.format_text()


def test_only_and_no_isolate(confacc, capsys, monkeypatch) -> None:
    import acc_host.conformance as kit

    def no_children(*args: object, **kwargs: object) -> None:
        raise AssertionError("--no-isolate started a child process")

    monkeypatch.setattr(kit, "run_isolated", no_children)
    status, output = _check(capsys, str(confacc()), "--no-isolate", "--only", "configure.*",
                            "--only", "errors.message")
    assert status == 0, output
    ids = [line.split()[1] for line in output.splitlines()[:-1]]
    # abi.load runs (silently): the selected checks have a library to call.
    assert ids == ["configure.queries", "configure.unknown_key", "configure.unknown_query",
                   "errors.message"]
    assert "4 passed, 0 failed" in output.splitlines()[-1]
    assert main(["check", str(confacc()), "--no-isolate", "--only", "no.such.check"]) == 3


def test_the_kits_models_have_non_zero_biases() -> None:
    """Every bias the kit gives a plugin (one-operator cases and networks) is
    non-zero throughout, so a dropped bias always shows."""
    from acc_host.conformance import cases
    from acc_host.conformance.checks_symbolic import _graph_case_instance

    biases = [weights[name] for instance in cases.instances()
              if instance.case.op in cases.BIAS_OPS and not instance.case.attrs.get("no_bias")
              for weights in [instance.weights] for name in list(weights)[-1:]]
    for case in cases.GRAPH_CASES:
        _, _, weights = _graph_case_instance(case, seed=0)
        biases += [value for name, value in weights.items() if name.endswith("_bias")]
    assert len(biases) >= 8
    assert all(np.all(value != 0) for value in biases)
