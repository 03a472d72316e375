"""Builds tests/c/test_kernels.c with the cpu_ref kernels under AddressSanitizer
and UndefinedBehaviorSanitizer, and runs it.

The C program does the checking; this module only makes it part of the pytest
run, so a memory error, undefined behaviour, leak or wrong value in a kernel
fails the suite.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

SOURCES = [
    "tests/c/test_kernels.c",
    "plugins/cpu_ref/kernels.c",
    "plugins/cpu_ref/parallel.c",
]

CFLAGS = [
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-g",
    "-O1",
    "-fsanitize=address,undefined",
    "-fno-omit-frame-pointer",
    "-pthread",
    "-Iinclude",
    "-Iplugins/cpu_ref",
]


def test_c_kernels(tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on PATH, so the C kernel tests cannot be built")

    binary = tmp_path / "test_kernels"
    # -lm goes after the sources so the linker still needs it when it sees it.
    build = subprocess.run(
        [gcc, *CFLAGS, *SOURCES, "-o", str(binary), "-lm"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, f"build failed:\n{build.stdout}{build.stderr}"

    env = dict(
        os.environ,
        ASAN_OPTIONS="detect_leaks=1",
        UBSAN_OPTIONS="halt_on_error=1",
    )
    result = subprocess.run(
        [str(binary)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        f"test_kernels exited with {result.returncode}:\n"
        f"{result.stdout}{result.stderr}"
    )
    assert " 0 failed" in result.stdout, result.stdout
