"""tests/c/test_cpu_ref_lifecycle.c: cpu_ref's entry points linked directly,
so that AddressSanitizer and LeakSanitizer check hundreds of load/infer/unload,
alloc/free and executor cycles and the failure paths for leaks and memory
errors."""

from pathlib import Path

from c_programs import ROOT, build_and_run


def test_cpu_ref_lifecycle_is_clean(tmp_path: Path) -> None:
    sources = [str(path.relative_to(ROOT)) for directory in ("plugins/cpu_ref", "plugins/common")
               for path in sorted((ROOT / directory).glob("*.c"))]
    report = build_and_run(["tests/c/test_cpu_ref_lifecycle.c", *sources],
                           tmp_path / "test_cpu_ref_lifecycle",
                           ["include", "plugins/common", "plugins/cpu_ref"])
    print(report)
