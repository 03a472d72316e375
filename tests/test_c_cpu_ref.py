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


@pytest.mark.sanitizer
def test_cpu_ref_lifecycle_is_clean(tmp_path: Path) -> None:
    report = build_and_run(["tests/c/test_cpu_ref_lifecycle.c", *SOURCES],
                           tmp_path / "test_cpu_ref_lifecycle", INCLUDES)
    print(report)


# The default sanitizers (AddressSanitizer, UndefinedBehaviorSanitizer), or
# ThreadSanitizer, which cannot be linked with them.
LANES_BUILDS = {"address": {}, "thread": {"extra_flags": ["-g", "-O1", "-fsanitize=thread"],
                                          "sanitize": False}}


@pytest.mark.sanitizer
@pytest.mark.parametrize("sanitizer", sorted(LANES_BUILDS))
def test_cpu_ref_lanes_agree_and_do_not_race(tmp_path: Path, sanitizer: str) -> None:
    report = build_and_run(["tests/c/test_cpu_ref_lanes.c", *SOURCES],
                           tmp_path / f"test_cpu_ref_lanes_{sanitizer}", INCLUDES,
                           **LANES_BUILDS[sanitizer])
    assert "ThreadSanitizer" not in report, report
    print(report)
