"""The test session: the bundled plugins built before anything imports
acc_host, the default run and the full run, and the fixtures that build
test plugins.

How a test never sees a stale or missing bundled plugin: importing acc_host
discovers and loads the libraries of src/acc_host/_bundled at that moment,
and collection imports acc_host (the test modules import it at their top).
So the build is the first thing of the session: pytest_sessionstart, which
pytest calls after loading this file and before it collects anything, runs
support.plugin_builds.build_bundled (build_plugins.build_all, which
recompiles what changed since the last build, or everything when switching
between release and sanitized builds). This file imports nothing that
imports acc_host, and neither does the package's pytest plugin
(acc_host_pytest) unless --acc-lib is given. Should something import acc_host
earlier all the same, and the build then change a library, the session stops
with that reason (StaleImportError) rather than test the previous build.
Child processes the tests start import acc_host after the build, so they see
the same libraries.

The test plugins (tests/plugins/*.c, built with deliberate faults) and
cpu_ref variants are compiled on demand by the session fixtures below, once
per variant and session. With ACC_HOST_SANITIZE=1 every plugin is built with
AddressSanitizer and UndefinedBehaviorSanitizer; run the suite that way with
the sanitizer runtimes preloaded (.ci/run shows how).

What the test modules share lives in the support package (tests/support/);
test modules import from it, never from one another or from this file.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# build_plugins.py (at the checkout's root) and the support package (in
# tests/) are importable from this file and from every test module.
for folder in (TESTS, ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from support.engines import using_engine  # noqa: E402
from support.paths import TEST_PLUGINS  # noqa: E402
from support.plugin_builds import (  # noqa: E402
    SANITIZE,
    StaleImportError,
    build_bundled,
    plugin_builder,
)
from support.serving import MISSING_REASON, SERVE_EXTRA  # noqa: E402

import build_plugins  # noqa: E402


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before collection imports acc_host: the probe cache of this run, and
    the bundled plugins built (see the module's docstring)."""
    # Discovery's probe results go to a cache of this run, not the user's
    # ~/.cache (child processes the tests start inherit it).
    if "MXNET_ACC_PROBE_CACHE" not in os.environ:
        os.environ["MXNET_ACC_PROBE_CACHE"] = str(
            Path(tempfile.mkdtemp(prefix="acc-host-tests-")) / "probe-cache.json")
    try:
        build_bundled()
    except (build_plugins.BuildError, StaleImportError) as error:
        pytest.exit(f"the bundled plugins: {error}", returncode=pytest.ExitCode.USAGE_ERROR)


# ---- the default run and the full run ---------------------------------------------------
#
# The long-running groups carry these markers (registered in pyproject.toml).
# The default run (`python3 -m pytest`) deselects them and keeps a sample of
# each group unmarked; `--run-all` or ACC_HOST_FULL_TESTS=1 runs everything
# (.ci/run does), and so does any `-m` expression or a test named by its id.
LONG_MARKERS = ("slow", "onnx_full", "sanitizer", "fuzz", "packaging", "stress")
FULL_RUN_VARIABLE = "ACC_HOST_FULL_TESTS"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-all", action="store_true", default=False,
                     help="also run the long-running tests (markers: "
                          f"{', '.join(LONG_MARKERS)}); {FULL_RUN_VARIABLE}=1 does the same")


def full_run(config: pytest.Config) -> bool:
    return bool(config.getoption("--run-all")) or os.environ.get(FULL_RUN_VARIABLE) == "1"


def pytest_report_header(config: pytest.Config) -> str:
    if full_run(config):
        return "acc-host tests: the full run (every long-running group)"
    return (f"acc-host tests: the default run, without the long-running tests marked "
            f"{', '.join(LONG_MARKERS)} (--run-all or {FULL_RUN_VARIABLE}=1 runs them)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if (full_run(config) or config.getoption("markexpr")
            or any("::" in arg for arg in config.args)):
        return
    keep: list[pytest.Item] = []
    long: list[pytest.Item] = []
    for item in items:
        marked = any(item.get_closest_marker(name) is not None for name in LONG_MARKERS)
        (long if marked else keep).append(item)
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = keep


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked needs_onnx skips, with the reason, where the onnx
    package is not installed (it comes with the test extra); one marked
    serve where the serve extra is not."""
    if item.get_closest_marker("needs_onnx") is not None and not _HAVE_ONNX:
        pytest.skip("needs the onnx package (pip install -e '.[test]')")
    # marker serve: tests/serve, which need the serve extra (docs/serving.md)
    if item.get_closest_marker("serve") is not None and not SERVE_EXTRA:
        pytest.skip(MISSING_REASON)


_HAVE_ONNX = importlib.util.find_spec("onnx") is not None


@pytest.fixture(scope="session")
def build_fake(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_fake(label, NAME=value, ...) compiles tests/plugins/fake_acc.c
    with -DNAME=value for each macro into a library named after label."""
    return plugin_builder(tmp_path_factory.mktemp("fake_plugins"),
                          lambda: [TEST_PLUGINS / "fake_acc.c"])


@pytest.fixture(scope="session")
def build_test_plugin(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_test_plugin(source, label, NAME=value, ...) compiles
    tests/plugins/<source> with the sources of plugins/common."""
    return plugin_builder(tmp_path_factory.mktemp("test_plugins"), lambda source: [
        TEST_PLUGINS / source, *sorted(build_plugins.COMMON_DIR.glob("*.c"))])


@pytest.fixture(scope="session")
def build_cpu_ref_variant(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_cpu_ref_variant(label, CR_NAME='"name"', CPU_REF_ONLY_OPS=...)
    builds cpu_ref under another name, e.g. keeping only some operators."""
    cpu_ref = build_plugins.PLUGINS_DIR / "cpu_ref"
    return plugin_builder(tmp_path_factory.mktemp("cpu_ref_variants"), lambda: [
        *build_plugins.plugin_sources(cpu_ref), *sorted(build_plugins.COMMON_DIR.glob("*.c"))],
        include_dirs=build_plugins.plugin_include_dirs(cpu_ref))


@pytest.fixture
def offload_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turns cost-aware partitioning off (acc_host.partition.offload): tests that
    check a plugin's numerics or placement on small graphs want every
    supported operator offered, whatever it would cost."""
    monkeypatch.setenv("MXNET_ACC_OFFLOAD_COST", "0")


@pytest.fixture(scope="session")
def perturbed_cpu_ref(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cpu_ref with one changed kernel: average pooling 0.1% too large
    (for the tools that must find it: trace replay, differential checks)."""
    out = tmp_path_factory.mktemp("perturbed")
    source_dir = out / "cpu_ref"
    shutil.copytree(ROOT / "plugins" / "cpu_ref", source_dir)
    # The general windows (the reference loop, which the fast kernel runs
    # too) and the whole-plane (global) fast paths: planes in blocks, small
    # planes one by one, large planes in partial sums.
    for name, original, changed in (
            ("reference/kernels.c", "return window_average(params, x, in, window);",
             "return 1.001f * window_average(params, x, in, window);"),
            ("fast/pooling.c", "y[p + b] = acc[b] / (float)size;",
             "y[p + b] = 1.001f * acc[b] / (float)size;"),
            ("fast/pooling.c", "y[p] = acc / (float)size;", "y[p] = 1.001f * acc / (float)size;"),
            ("fast/pooling.c", "y[p] = plane_sum_partials(x + p * size, size) / (float)size;",
             "y[p] = 1.001f * plane_sum_partials(x + p * size, size) / (float)size;")):
        kernels = source_dir / "kernels" / name
        text = kernels.read_text()
        assert text.count(original) == 1, "the average pooling kernel moved: update this test"
        kernels.write_text(text.replace(original, changed))
    sources = [*build_plugins.plugin_sources(source_dir),
               *sorted(build_plugins.COMMON_DIR.glob("*.c"))]
    return build_plugins.compile_library(
        sources, out / build_plugins.library_name("cpu_ref"),
        include_dirs=build_plugins.plugin_include_dirs(source_dir),
        sanitize=SANITIZE)


@pytest.fixture(params=["NaiveEngine", "ThreadedEngine"])
def engine_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each engine in turn (see using_engine)."""
    with using_engine(request.param) as kind:
        yield kind
