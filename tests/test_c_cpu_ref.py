"""tests/c/test_cpu_ref_lifecycle.c: cpu_ref's entry points linked directly,
so that AddressSanitizer and LeakSanitizer check hundreds of load/infer/unload,
alloc/free and executor cycles and the failure paths for leaks and memory
errors; tests/c/test_cpu_ref_lanes.c: a batch run as lanes on 2 and 3
threads gives the 1-thread results bit for bit, under AddressSanitizer and
under ThreadSanitizer (any data race between the lanes fails it)."""

from pathlib import Path

import pytest
from c_programs import ROOT, build_and_run

SOURCES = [str(path.relative_to(ROOT)) for directory in ("plugins/cpu_ref", "plugins/common")
           for path in sorted((ROOT / directory).glob("*.c"))]
INCLUDES = ["include", "plugins/common", "plugins/cpu_ref"]


def test_cpu_ref_lifecycle_is_clean(tmp_path: Path) -> None:
    report = build_and_run(["tests/c/test_cpu_ref_lifecycle.c", *SOURCES],
                           tmp_path / "test_cpu_ref_lifecycle", INCLUDES)
    print(report)


@pytest.mark.parametrize("sanitizer", ["address", "thread"])
def test_cpu_ref_lanes_agree_and_do_not_race(tmp_path: Path, sanitizer: str) -> None:
    if sanitizer == "address":
        report = build_and_run(["tests/c/test_cpu_ref_lanes.c", *SOURCES],
                               tmp_path / "test_cpu_ref_lanes", INCLUDES)
    else:
        report = build_and_run(["tests/c/test_cpu_ref_lanes.c", *SOURCES],
                               tmp_path / "test_cpu_ref_lanes_tsan", INCLUDES,
                               extra_flags=["-g", "-O1", "-fsanitize=thread"], sanitize=False)
    assert "ThreadSanitizer" not in report, report
    print(report)
