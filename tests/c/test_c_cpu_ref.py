"""tests/c/test_cpu_ref_lifecycle.c: cpu_ref's entry points linked directly,
so that AddressSanitizer and LeakSanitizer check hundreds of load/infer/unload,
alloc/free and executor cycles and the failure paths for leaks and memory
errors; tests/c/test_cpu_ref_lanes.c: a batch run as lanes on 2 and 3
threads gives the 1-thread results bit for bit, under AddressSanitizer and
under ThreadSanitizer (any data race between the lanes fails it). Both run
with the fast kernels and, through ACC_CPU_REF_KERNELS, the reference ones
(plugins/cpu_ref/kernels/reference/); tests/c/test_cpu_ref_concat_views.c:
Concats written in place into a later Concat's output (views of views) match
a reference computed in C, under AddressSanitizer."""

from pathlib import Path

import pytest
from support.c_programs import build_and_run, cpu_ref_includes, cpu_ref_sources

SOURCES = cpu_ref_sources()
INCLUDES = cpu_ref_includes()


KERNELS = ["fast", "reference"]


@pytest.mark.sanitizer
@pytest.mark.parametrize("kernels", KERNELS)
def test_cpu_ref_lifecycle_is_clean(tmp_path: Path, kernels: str) -> None:
    report = build_and_run(["tests/c/test_cpu_ref_lifecycle.c", *SOURCES],
                           tmp_path / "test_cpu_ref_lifecycle", INCLUDES,
                           env={"ACC_CPU_REF_KERNELS": kernels})
    print(report)


@pytest.mark.sanitizer
def test_cpu_ref_concat_views_of_views_are_right(tmp_path: Path) -> None:
    report = build_and_run(["tests/c/test_cpu_ref_concat_views.c", *SOURCES],
                           tmp_path / "test_cpu_ref_concat_views", INCLUDES)
    print(report)


# The default sanitizers (AddressSanitizer, UndefinedBehaviorSanitizer), or
# ThreadSanitizer, which cannot be linked with them.
LANES_BUILDS = {"address": {}, "thread": {"extra_flags": ["-g", "-O1", "-fsanitize=thread"],
                                          "sanitize": False}}


@pytest.mark.sanitizer
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("sanitizer", sorted(LANES_BUILDS))
def test_cpu_ref_lanes_agree_and_do_not_race(tmp_path: Path, sanitizer: str,
                                             kernels: str) -> None:
    report = build_and_run(["tests/c/test_cpu_ref_lanes.c", *SOURCES],
                           tmp_path / f"test_cpu_ref_lanes_{sanitizer}", INCLUDES,
                           env={"ACC_CPU_REF_KERNELS": kernels}, **LANES_BUILDS[sanitizer])
    assert "ThreadSanitizer" not in report, report
    print(report)
