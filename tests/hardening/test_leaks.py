"""Leaks and memory growth of the bundled plugins over many model and
memory cycles (issue 10, point 3).

LeakSanitizer: tests/c/test_leak_cycles.c dlopens cpu_ref and mlu_sim built
with AddressSanitizer and UndefinedBehaviorSanitizer and runs 1,000 cycles of
loadModel / infer / unloadModel of a small real graph and 1,000 of mx_alloc /
copyToAcc / an imperative executor / copyFromAcc / mx_free through the ABI;
LeakSanitizer checks at exit that no block was lost (a control run shows it
reports a lost block). A C driver rather than the host: Python itself leaves
blocks behind at exit, which would need suppressions.

RSS: a child Python process runs the same cycles through acc_host
(LoadedModel, DeviceBuffer) on the release builds, and the resident set
(/proc/self/statm) after 1,000 cycles must be within RSS_GROWTH_LIMIT of
what it was after the warm-up: what LeakSanitizer cannot see (memory still
referenced, such as a table that grows) would show there. The figures are
printed (pytest -s) and recorded in docs/fuzzing.md.

ACC_LEAK_CYCLES changes the number of cycles (default 1000).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from support.c_programs import BASE_FLAGS, ROOT, SANITIZE_FLAGS, compiler, sanitizer_env
from support.plugin_builds import SANITIZE

import build_plugins

CYCLES = int(os.environ.get("ACC_LEAK_CYCLES", "1000"))
WARMUP = 200
RSS_GROWTH_LIMIT = 2 << 20  # bytes
PLUGINS = {"cpu_ref": ("cpu_ref", 0), "mlu_sim": ("mlu", 0)}  # directory: (library name, device)


# ---- LeakSanitizer ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The plugins built with the sanitizers (those of the session when it is
    a sanitized one), and the driver."""
    out = tmp_path_factory.mktemp("leaks")
    libraries: dict[str, Path] = {}
    errors: list[BaseException] = []

    def build_one(plugin: str) -> None:
        try:
            if SANITIZE:
                libraries[plugin] = build_plugins.DEFAULT_OUT / build_plugins.library_name(plugin)
                return
            source = build_plugins.PLUGINS_DIR / plugin
            libraries[plugin] = build_plugins.compile_library(
                [*build_plugins.plugin_sources(source),
                 *sorted(build_plugins.COMMON_DIR.glob("*.c"))],
                out / build_plugins.library_name(plugin), sanitize=True,
                include_dirs=build_plugins.plugin_include_dirs(source))
        except BaseException as error:  # noqa: BLE001 (re-raised below)
            errors.append(error)

    threads = [threading.Thread(target=build_one, args=(plugin,)) for plugin in PLUGINS]
    for thread in threads:
        thread.start()
    driver = out / "test_leak_cycles"
    built = subprocess.run([compiler(), *BASE_FLAGS, *SANITIZE_FLAGS, f"-I{ROOT / 'include'}",
                            f"-I{ROOT / 'tests' / 'c'}", str(ROOT / "tests/c/test_leak_cycles.c"),
                            "-o", str(driver), "-ldl", "-lm"],
                           capture_output=True, text=True, env=sanitizer_env())
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    assert built.returncode == 0, built.stdout + built.stderr
    return {**libraries, "driver": driver}


def _run_driver(sanitized: dict[str, Path], library: Path, cycles: int,
                extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**sanitizer_env(), **(extra_env or {})}
    return subprocess.run([str(sanitized["driver"]), str(library), str(cycles), "0"],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.sanitizer
@pytest.mark.parametrize("plugin", list(PLUGINS))
def test_no_leaks_over_model_and_memory_cycles(sanitized: dict[str, Path], plugin: str) -> None:
    result = _run_driver(sanitized, sanitized[plugin], CYCLES)
    report = result.stdout + result.stderr
    print(f"{plugin}: {report}")
    assert "LeakSanitizer" not in report, report
    assert result.returncode == 0, report
    assert f"cycles {CYCLES}:" in result.stdout and " 0 failed" in result.stdout, report


@pytest.mark.sanitizer
def test_leak_sanitizer_reports_a_lost_block(sanitized: dict[str, Path]) -> None:
    """The control: the driver loses one block on purpose (ACC_LEAK_CONTROL)."""
    result = _run_driver(sanitized, sanitized["cpu_ref"], 1, {"ACC_LEAK_CONTROL": "1"})
    report = result.stdout + result.stderr
    assert result.returncode != 0 and "detected memory leaks" in report, report
    assert "leak_control" in report, report


# ---- RSS ----------------------------------------------------------------------------------

_RSS_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import acc_host as mx
    from acc_host.abi.annotate import annotate_symbol
    from acc_host.abi.memory import DeviceBuffer
    from acc_host.abi.loaded_model import LoadedModel
    from acc_host.abi.tensor import TensorSpec

    name, dev_id, warmup, cycles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    library = mx.get_library(name)
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, num_filter=3, kernel=(3, 3), pad=(1, 1), name="conv")
    x = mx.sym.Activation(x, act_type="relu", name="relu")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    x = mx.sym.FullyConnected(mx.sym.Flatten(x, name="flat"), num_hidden=4, name="fc")
    out = mx.sym.softmax(x, name="prob")
    rng = np.random.default_rng(0)
    weights = {"conv_weight": rng.standard_normal((3, 2, 3, 3)),
               "conv_bias": rng.standard_normal(3),
               "fc_weight": rng.standard_normal((4, 12)), "fc_bias": rng.standard_normal(4)}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    shapes = {"data": (1, 2, 5, 5), **{k: v.shape for k, v in weights.items()}}
    graph = annotate_symbol(out, shapes, weights=weights, dev_id=dev_id)
    image = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    spec = TensorSpec((2, 25), np.float32)
    host = rng.standard_normal((2, 25)).astype(np.float32)

    def cycle():
        with LoadedModel(library, graph, weights, dev_id=dev_id) as model:
            result = model.infer({"data": image})["prob_output"]
        buffer = DeviceBuffer(library, dev_id, spec)
        buffer.copy_from_host(host)
        back = buffer.to_host()
        buffer.free()
        return result, back

    def rss():
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    first = cycle()
    for _ in range(warmup):
        cycle()
    before = rss()
    for _ in range(cycles):
        result, back = cycle()
    after = rss()
    assert np.array_equal(result, first[0]) and np.array_equal(back, host)
    print(json.dumps({"before": before, "after": after}))
""")


@pytest.mark.skipif(SANITIZE, reason="AddressSanitizer's quarantine holds freed memory: RSS is "
                    "measured on release builds")
@pytest.mark.parametrize("plugin", list(PLUGINS))
def test_rss_stays_flat_over_cycles(plugin: str) -> None:
    name, dev_id = PLUGINS[plugin]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env["MXNET_ENGINE_TYPE"] = "NaiveEngine"
    result = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, name, str(dev_id), str(WARMUP),
                             str(CYCLES)], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    growth = figures["after"] - figures["before"]
    print(f"{plugin}: RSS after {WARMUP} warm-up cycles {figures['before'] / 2**20:.2f} MiB, "
          f"after {CYCLES} more {figures['after'] / 2**20:.2f} MiB: {growth / 1024:+.0f} KiB")
    assert growth < RSS_GROWTH_LIMIT, figures


# ---- the sanitized session builds the test plugins sanitized too ---------------------------------


def _instrumented(library: Path) -> bool:
    """Whether library was compiled with AddressSanitizer and UBSan (their
    runtime entry points are referenced by name whichever compiler built it)."""
    data = library.read_bytes()
    return b"__asan_report_" in data and b"__ubsan_handle_" in data


def test_test_plugins_are_built_like_the_session(build_fake, build_test_plugin) -> None:
    """With ACC_HOST_SANITIZE=1 (.ci/run's sanitized steps) the deliberately
    broken test plugins are sanitized like the bundled ones, so that their
    tests run under the sanitizers too; without it none is. (conftest's
    cpu_ref variants take the same path, _plugin_builder, or pass SANITIZE
    the same way: perturbed_cpu_ref.)"""
    libraries = [build_fake("leaks_fake"),
                 build_test_plugin("symbolic_relu.c", "leaks_relu"),
                 *(build_plugins.DEFAULT_OUT / build_plugins.library_name(plugin)
                   for plugin in PLUGINS)]
    for library in libraries:
        assert _instrumented(library) == SANITIZE, library
