"""Shared fixtures: the bundled plugins are built once per session, and the
deliberately broken test plugins are built on demand.

With ACC_HOST_SANITIZE=1 every plugin is built with AddressSanitizer and
UndefinedBehaviorSanitizer; run the suite that way with the sanitizer
runtimes preloaded (.ci/run shows how).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_PLUGINS = Path(__file__).resolve().parent / "plugins"
sys.path.insert(0, str(ROOT))

import build_plugins  # noqa: E402

# Plugins are (re)built before acc_host is first imported, so discovery at
# import finds the current cpu_ref.
SANITIZE = os.environ.get("ACC_HOST_SANITIZE") == "1"
build_plugins.build_all(sanitize=SANITIZE, log=lambda message: None)

# Discovery's probe results go to a cache of this run, not the user's
# ~/.cache (child processes the tests start inherit it).
if "MXNET_ACC_PROBE_CACHE" not in os.environ:
    import tempfile

    os.environ["MXNET_ACC_PROBE_CACHE"] = str(
        Path(tempfile.mkdtemp(prefix="acc-host-tests-")) / "probe-cache.json")

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
    package is not installed (it comes with the test extra)."""
    if item.get_closest_marker("needs_onnx") is not None and not _HAVE_ONNX:
        pytest.skip("needs the onnx package (pip install -e '.[test]')")


_HAVE_ONNX = importlib.util.find_spec("onnx") is not None


def _plugin_builder(out_dir: Path, sources: Callable[..., list[Path]],
                    include_dirs: Sequence[Path] = ()) -> Callable[..., Path]:
    """A function (*source_args, label, NAME=value, ...) -> library path that
    compiles sources(*source_args) with -DNAME=value for each macro (a bare
    -DNAME for True) into lib<label>.so, once per label."""
    built: dict[str, Path] = {}

    def build(*args: Any, **macros: object) -> Path:
        *source_args, label = args
        if label not in built:
            flags = [f"-D{name}" if value is True else f"-D{name}={value}"
                     for name, value in macros.items()]
            built[label] = build_plugins.compile_library(
                sources(*source_args), out_dir / build_plugins.library_name(label),
                sanitize=SANITIZE, werror=True, extra_flags=flags, include_dirs=include_dirs)
        return built[label]

    return build


@pytest.fixture(scope="session")
def build_fake(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_fake(label, NAME=value, ...) compiles tests/plugins/fake_acc.c
    with -DNAME=value for each macro into a library named after label."""
    return _plugin_builder(tmp_path_factory.mktemp("fake_plugins"),
                           lambda: [TEST_PLUGINS / "fake_acc.c"])


@pytest.fixture(scope="session")
def build_test_plugin(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_test_plugin(source, label, NAME=value, ...) compiles
    tests/plugins/<source> with the sources of plugins/common."""
    return _plugin_builder(tmp_path_factory.mktemp("test_plugins"), lambda source: [
        TEST_PLUGINS / source, *sorted(build_plugins.COMMON_DIR.glob("*.c"))])


@pytest.fixture(scope="session")
def build_cpu_ref_variant(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_cpu_ref_variant(label, CR_NAME='"name"', CPU_REF_ONLY_OPS=...)
    builds cpu_ref under another name, e.g. keeping only some operators."""
    cpu_ref = build_plugins.PLUGINS_DIR / "cpu_ref"
    return _plugin_builder(tmp_path_factory.mktemp("cpu_ref_variants"), lambda: [
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
    # too) and the whole-plane (global) fast path.
    for name, original, changed in (
            ("reference/kernels.c", "return window_average(params, x, in, window);",
             "return 1.001f * window_average(params, x, in, window);"),
            ("fast/pooling.c", "y[p + b] = acc[b] / (float)size;",
             "y[p + b] = 1.001f * acc[b] / (float)size;"),
            ("fast/pooling.c", "y[p] = acc / (float)size;", "y[p] = 1.001f * acc / (float)size;")):
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


def settle_engine() -> None:
    """Waits for everything pushed; failures an earlier test left behind
    (a forward nobody waited for, a library that died) are not the caller's."""
    import acc_host as mx

    try:
        mx.engine.wait_for_all()
    except Exception:  # whatever an earlier test left
        pass


@contextlib.contextmanager
def using_engine(kind: str) -> Any:
    """The engine kind for the block, from and back to a settled engine."""
    import acc_host as mx

    previous = mx.engine.engine_type()
    settle_engine()
    mx.engine.set_engine_type(kind)
    try:
        yield kind
    finally:
        settle_engine()
        mx.engine.set_engine_type(previous)


@pytest.fixture(params=["NaiveEngine", "ThreadedEngine"])
def engine_kind(request: pytest.FixtureRequest) -> Any:
    """Each engine in turn (see using_engine)."""
    with using_engine(request.param) as kind:
        yield kind
