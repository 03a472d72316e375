"""Building and running the C test programs of tests/c/ under the
sanitizers (AddressSanitizer with leak detection, UndefinedBehaviorSanitizer)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# CR_SCRATCH_POISON: as in build_plugins.SANITIZE_FLAGS (cpu_ref's scratch
# memory handed out filled with NaNs).
SANITIZE_FLAGS = ["-g", "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                  "-fno-sanitize-recover=undefined", "-DCR_SCRATCH_POISON"]
BASE_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread"]


def compiler() -> str:
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        pytest.skip("no C compiler on PATH")
    return found


def sanitizer_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the program links its own sanitizer runtime
    env["ASAN_OPTIONS"] = "detect_leaks=1"
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    return env


def build_and_run(sources: Sequence[str], output: Path, include_dirs: Sequence[str],
                  extra_flags: Sequence[str] = (), sanitize: bool = True) -> str:
    """Compiles sources (relative to the repository) with the sanitizers
    (without them when sanitize is false: instrumented memory accesses keep
    GCC from vectorising loops), runs the program, asserts it succeeded and
    printed "0 failed"; returns its output."""
    command = [compiler(), *BASE_FLAGS, *(SANITIZE_FLAGS if sanitize else ()), *extra_flags,
               *(f"-I{ROOT / path}" for path in include_dirs),
               *(str(ROOT / source) for source in sources), "-o", str(output), "-lm"]
    built = subprocess.run(command, capture_output=True, text=True, env=sanitizer_env())
    assert built.returncode == 0, f"build failed:\n{built.stdout}{built.stderr}"
    result = subprocess.run([str(output)], capture_output=True, text=True, timeout=600,
                            env=sanitizer_env(), cwd=output.parent)
    report = result.stdout + result.stderr
    assert result.returncode == 0, f"{output.name} exited with {result.returncode}:\n{report}"
    assert " 0 failed" in result.stdout, report
    return report
