"""The CPU path's BLAS thread policy (acc_host.engine.blas_threads): one thread
unless the user asks otherwise, applied when the engine starts. Each case
runs in a fresh interpreter, because the BLAS setting is process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json
import numpy  # noqa: F401  (loads the BLAS)
from threadpoolctl import threadpool_info
import acc_host as mx
before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
mx.nd.zeros((2, 2)).asnumpy()  # starts the engine
after = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after}))
"""
_BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                   "MXNET_CPU_BLAS_THREADS")


def _probe(**env: str) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if key not in _BLAS_VARIABLES}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env={**clean, **env}, timeout=120)


def _threads(**env: str) -> dict:
    done = _probe(**env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module", autouse=True)
def _needs_blas() -> None:
    import numpy  # noqa: F401  (loads the BLAS)
    from threadpoolctl import threadpool_info

    if not any(lib["user_api"] == "blas" for lib in threadpool_info()):
        pytest.skip("numpy here has no BLAS library that threadpoolctl can control")
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs to tell 1 thread from the BLAS default")


def test_one_blas_thread_by_default() -> None:
    figures = _threads()
    assert max(figures["before"]) >= 2  # BLAS starts with one thread per core
    assert figures["after"] and set(figures["after"]) == {1}


def test_mxnet_cpu_blas_threads_sets_the_count() -> None:
    assert set(_threads(MXNET_CPU_BLAS_THREADS="2")["after"]) == {2}


def test_the_users_own_blas_variables_are_left_alone() -> None:
    figures = _threads(OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    assert figures["after"] == figures["before"]


def test_a_bad_count_is_a_clear_error() -> None:
    done = _probe(MXNET_CPU_BLAS_THREADS="many")
    assert done.returncode != 0
    assert "MXNET_CPU_BLAS_THREADS='many': expected a positive integer" in done.stderr
    assert "InvalidArgumentError" in done.stderr
