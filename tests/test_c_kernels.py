"""tests/c/test_kernels.c: the cpu_ref kernels on hand-computed cases, under
AddressSanitizer and UndefinedBehaviorSanitizer."""

from pathlib import Path

from c_programs import build_and_run


def test_c_kernels(tmp_path: Path) -> None:
    build_and_run(["tests/c/test_kernels.c", "plugins/cpu_ref/kernels.c",
                   "plugins/cpu_ref/kernels_dense.c", "plugins/cpu_ref/gemm.c",
                   "plugins/cpu_ref/kernels_data.c", "plugins/cpu_ref/parallel.c"],
                  tmp_path / "test_kernels",
                  ["include", "plugins/cpu_ref"])
