"""tests/c/test_kernels.c: the cpu_ref kernels on hand-computed cases, under
AddressSanitizer and UndefinedBehaviorSanitizer; tests/c/test_elementwise.c:
the element-wise kernels against scalar references, built both as shipped
(vectorised) and sanitized."""

import subprocess
from pathlib import Path

import pytest
from support.c_programs import build_and_run, compiler, cpu_ref_includes, cpu_ref_kernel_sources


@pytest.mark.sanitizer
def test_c_kernels(tmp_path: Path) -> None:
    build_and_run(["tests/c/test_kernels.c", *cpu_ref_kernel_sources()],
                  tmp_path / "test_kernels", cpu_ref_includes())


ELEMENTWISE_SOURCES = ["tests/c/test_elementwise.c", *cpu_ref_kernel_sources()]


@pytest.mark.slow
def test_c_elementwise_vectorised(tmp_path: Path) -> None:
    """tests/c/test_elementwise.c: the element-wise kernels built as the
    shipped library is (-O2, GCC's dynamic vector cost model, no
    sanitizers: their instrumentation keeps loops from vectorising), so that
    the vectorised loops and the remainders after them are what is tested
    against the scalar references."""
    version = subprocess.run([compiler(), "--version"], capture_output=True, text=True).stdout
    flags = ["-O2"] + ([] if "clang" in version else ["-fvect-cost-model=dynamic"])
    build_and_run(ELEMENTWISE_SOURCES, tmp_path / "test_elementwise",
                  cpu_ref_includes(), extra_flags=flags, sanitize=False)


@pytest.mark.sanitizer
def test_c_elementwise_sanitized(tmp_path: Path) -> None:
    """The same, under the sanitizers (scalar code at -O1)."""
    build_and_run(ELEMENTWISE_SOURCES, tmp_path / "test_elementwise",
                  cpu_ref_includes())
