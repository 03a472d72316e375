"""The conformance kit (acc_host.conformance): the good plugins pass it, and
each deliberately broken build of tests/plugins/conformance_acc.c (one rule
of mxnet_acc.h broken per build) fails exactly on the check for that rule.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.quickstart import C_FIRST_LINE, build_command, compile_or_fail, page_blocks

import acc_host
from acc_host.conformance import FAIL, PASS, SKIP, CheckResult, Report, check_library
from acc_host.conformance.checks_memory import DTYPES

BUNDLED = Path(acc_host.__file__).resolve().parent / "_bundled"
SRC = Path(acc_host.__file__).resolve().parent.parent
ID_PATTERN = re.compile(r"[a-z_]+(\.[A-Za-z0-9_]+)+\Z")
# Checks every library that loads gets, whatever it claims.
CORE_IDS = {"abi.symbols", "abi.version", "abi.load", "abi.name", "abi.initialize_repeat",
            "abi.version_refused", "abi.version_minor", "devices.count", "devices.out_of_range",
            "memory.zero_size", "memory.copy_mismatch", "memory.balance",
            "supported_ops.valid_ids", "supported_ops.stable", "supported_ops.op_version",
            "symbolic.nonfinite", "symbolic.graphs", "symbolic.unload_reload",
            "symbolic.duplicate_id",
            "symbolic.weight_update", "imperative.unknown_op", "imperative.numerics",
            "configure.queries", "configure.unknown_key", "configure.unknown_query",
            "errors.message", "errors.per_thread", "threads.repeated", "threads.concurrent",
            *(f"memory.roundtrip.{dtype}" for dtype in DTYPES)}


def _failed(report: Report) -> set[str]:
    return {result.id for result in report.failed()}


def _assert_conforms(report: Report) -> None:
    assert report.passed, report.format_text()
    assert CORE_IDS <= set(report.by_id()), sorted(CORE_IDS - set(report.by_id()))
    assert all(ID_PATTERN.match(result.id) for result in report.results)


@pytest.fixture(scope="module")
def confacc(build_test_plugin) -> Callable[..., Path]:
    """confacc(label, MACRO=True, ...): a build of conformance_acc.c."""
    def build(label: str = "good", **macros: object) -> Path:
        return build_test_plugin("conformance_acc.c", f"confacc_{label}", **macros)
    return build


# ---- the good plugins ------------------------------------------------------------------


def test_cpu_ref_passes_in_process() -> None:
    report = check_library(BUNDLED / "libcpu_ref.so", isolate=False)
    _assert_conforms(report)
    ids = report.by_id()
    # Every operator and dtype cpu_ref claims from the standard set has its check.
    for check_id in ("symbolic.numerics.Convolution.float32",
                     "symbolic.numerics.Convolution.float16",
                     "symbolic.numerics.transpose.int8", "symbolic.numerics.Concat.int64"):
        assert ids[check_id].status == PASS, ids[check_id]
    assert ids["imperative.numerics"].status == PASS


def test_mlu_sim_passes_on_chosen_devices() -> None:
    report = check_library(BUNDLED / "libmlu_sim.so", devices=[0, 2])
    _assert_conforms(report)
    assert report.devices == [0, 2]
    assert "devices [0, 2]" in report.by_id()["memory.roundtrip.float16"].detail
    assert "4 threads on 2 device(s)" in report.by_id()["threads.concurrent"].detail


@pytest.fixture(scope="module")
def quickstart_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (block,) = page_blocks("c", C_FIRST_LINE)
    directory = tmp_path_factory.mktemp("conformance_quickstart")
    source = directory / "myacc.c"
    source.write_text(block, encoding="utf-8")
    output = directory / "libmyacc.so"
    compile_or_fail(build_command(source, output, ["-Werror"]), directory)
    return output


def test_quickstart_plugin_passes(quickstart_library: Path) -> None:
    report = check_library(quickstart_library)
    _assert_conforms(report)
    ids = report.by_id()
    assert ids["symbolic.numerics.Activation.float32"].status == PASS
    # Symbolic-only: the memory and executor checks do not apply.
    assert ids["memory.balance"].status == SKIP and "supportsImperative" in \
        ids["memory.balance"].detail
    assert ids["imperative.unknown_op"].status == SKIP


def test_the_test_plugin_passes(confacc) -> None:
    report = check_library(confacc())
    _assert_conforms(report)
    ids = report.by_id()
    assert {ids[f"symbolic.numerics.{op}.float32"].status for op in
            ("Activation", "elemwise_add")} == {PASS}
    assert ids["symbolic.weight_update"].status == PASS
    assert "2 device(s)" in ids["threads.concurrent"].detail


# ---- the broken plugins -----------------------------------------------------------------

ROUNDTRIPS = {f"memory.roundtrip.{dtype}" for dtype in DTYPES}
CORRUPTED_GUARD_READS = {"memory.copy_mismatch", "header.any_thread", "header.device_weights"}
SANITIZED = os.environ.get("ACC_HOST_SANITIZE") == "1"

BROKEN = [
    # (macro, the checks that must fail, and only those)
    ("CONF_ANY_VERSION", {"abi.version_refused"}),
    ("CONF_BAD_IDS", {"supported_ops.valid_ids"}),
    ("CONF_UNSTABLE_OPS", {"supported_ops.stable"}),
    ("CONF_CORRUPT_COPY", ROUNDTRIPS),
    ("CONF_LEAKY_FREE", {"memory.balance"}),
    ("CONF_RELEASE_KEEPS_ONE", {"memory.balance"}),
    ("CONF_NAIVE_FREE", {"memory.balance"}),
    ("CONF_ACCEPT_UNKNOWN_KEYS", {"configure.unknown_key"}),
    # weight_update runs elemwise_add too (the only claimed case with weights)
    ("CONF_WRONG_ADD", {"symbolic.numerics.elemwise_add.float32", "symbolic.weight_update"}),
    ("CONF_NO_MESSAGE", {"errors.message"}),
    ("CONF_GLOBAL_MESSAGE", {"errors.per_thread"}),
    ("CONF_UNLOAD_KEEPS", {"symbolic.unload_reload"}),
    ("CONF_SHARED_SCRATCH", {"threads.concurrent"}),
]


# The default run checks this one (each builds a plugin and runs every check;
# test_wrong_numerics_name_the_operator_and_spare_the_others shares its
# build); the others are slow.
DEFAULT_BROKEN = {"CONF_WRONG_ADD"}


@pytest.mark.parametrize("macro, expected", [
    pytest.param(macro, expected, id=macro,
                 marks=[] if macro in DEFAULT_BROKEN else [pytest.mark.slow])
    for macro, expected in BROKEN])
def test_broken_plugin_fails_the_right_check(confacc, macro: str, expected: set[str]) -> None:
    report = check_library(confacc(macro.lower(), **{macro: True}))
    assert not report.passed
    failed = _failed(report)
    if macro == "CONF_CORRUPT_COPY" and not SANITIZED:
        # A copyFromAcc that flips a bit also damages what the host reads back
        # of the guard bytes after a device buffer (checked outputs, which the
        # kit runs an unsanitized library with): the checks that fill a device
        # buffer fail on that too.
        failed -= CORRUPTED_GUARD_READS
    assert failed == expected, report.format_text()
    # The rest still ran: the library loaded and the later checks have results.
    assert report.by_id()["abi.load"].status == PASS
    assert report.by_id()["threads.repeated"].status in (PASS, SKIP)


def test_wrong_numerics_name_the_operator_and_spare_the_others(confacc) -> None:
    report = check_library(confacc("conf_wrong_add", CONF_WRONG_ADD=True))
    ids = report.by_id()
    assert ids["symbolic.numerics.Activation.float32"].status == PASS
    detail = ids["symbolic.numerics.elemwise_add.float32"].detail
    assert "elements off" in detail and "rtol 0.0001" in detail


def test_a_crash_fails_its_check_and_the_run_goes_on(confacc) -> None:
    report = check_library(confacc("conf_naive_free", CONF_NAIVE_FREE=True))
    balance = report.by_id()["memory.balance"]
    # the double free aborts the process (SIGABRT); under AddressSanitizer,
    # ASan reports it and exits with status 1
    assert balance.status == FAIL and ("SIGABRT" in balance.detail
                                       or "double-free"
                                       in balance.detail)
    assert report.by_id()["configure.queries"].status == PASS
    assert [result.id for result in report.results].count("memory.balance") == 1


def test_a_plugin_refusing_every_host_version(build_fake) -> None:
    report = check_library(build_fake("refuses_all", FAKE_REFUSE_VERSION=True))
    ids = report.by_id()
    assert _failed(report) == {"abi.load", "abi.version_minor"}, report.format_text()
    assert "refused host ABI version 1.2" in ids["abi.load"].detail
    assert ids["abi.version_refused"].status == PASS  # it does refuse 2.x
    assert ids["configure.queries"].status == SKIP
    assert "did not load" in ids["configure.queries"].detail


def test_missing_and_non_library_files_never_raise(tmp_path: Path) -> None:
    report = check_library(tmp_path / "nothing.so", isolate=False)
    assert not report.passed and report.by_id()["abi.load"].status == FAIL
    assert "not found" in report.by_id()["abi.load"].detail
    text = tmp_path / "libtext.so"
    text.write_text("not a library")
    report = check_library(text, isolate=False)
    assert report.by_id()["abi.symbols"].status == FAIL
    assert "loader" in report.by_id()["abi.symbols"].detail
    assert {result.status for result in report.results} <= {FAIL, SKIP}


def test_unknown_devices_are_reported(confacc) -> None:
    report = check_library(confacc(), devices=[1, 7], isolate=False)
    assert _failed(report) == {"devices.count"}
    assert "[7] do not exist" in report.by_id()["devices.count"].detail
    assert report.devices == [1]


# ---- the report -------------------------------------------------------------------------


def test_report_text_and_json(confacc) -> None:
    report = check_library(confacc("conf_no_message", CONF_NO_MESSAGE=True), isolate=False)
    lines = report.format_text().splitlines()
    assert len(lines) == len(report.results) + 1
    assert lines[-1].startswith(str(report.path)) and "does NOT conform" in lines[-1]
    failing = next(line for line in lines if line.startswith("FAIL"))
    assert failing.split()[1] == "errors.message"
    data = json.loads(json.dumps(report.to_json()))
    assert data["passed"] is False and data["counts"][FAIL] == 1
    assert data["results"][0]["id"] == "abi.symbols"
    assert CheckResult.from_json(data["results"][0]) == CheckResult(
        data["results"][0]["id"], data["results"][0]["status"], data["results"][0]["detail"],
        data["results"][0]["seconds"])
    with pytest.raises(ValueError):
        CheckResult("x.y", "MAYBE")


# ---- the pytest plugin --------------------------------------------------------------------


def _pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a child, with this checkout's acc_host and the plugin loaded
    explicitly; entry-point plugins are not loaded, so an installed acc-host
    (which registers it through its entry point) does not register it twice."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                           "acc_host_pytest", *args], cwd=directory,
                          capture_output=True, text=True, timeout=300, check=False, env=env)


def test_pytest_plugin_runs_one_item_per_check(confacc, tmp_path: Path) -> None:
    library = confacc("conf_wrong_add", CONF_WRONG_ADD=True)
    result = _pytest(tmp_path, f"--acc-lib={library}", "-rA")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    name = f"acc-conformance[{library.name}]"
    assert f"FAILED {name}::check[symbolic.numerics.elemwise_add.float32]" in output
    assert f"PASSED {name}::check[symbolic.numerics.Activation.float32]" in output
    assert re.search(r"2 failed, \d+ passed, 3 skipped", output), output


def test_pytest_plugin_selects_with_marker_and_k(confacc, tmp_path: Path) -> None:
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    result = _pytest(tmp_path, f"--acc-lib={confacc()}", "-m", "acc_conformance", "-k",
                     "configure", "-v")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "3 passed" in output and "test_other" not in output.split("deselected")[-1]


def test_pytest_plugin_adds_nothing_without_acc_lib(tmp_path: Path) -> None:
    (tmp_path / "test_other.py").write_text("def test_other():\n    pass\n")
    result = _pytest(tmp_path, "-v")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "1 passed" in output and "acc-conformance" not in output
