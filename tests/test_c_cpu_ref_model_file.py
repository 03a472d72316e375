"""tests/c/test_cpu_ref_model_file.c: cpu_ref's compiled-model files
(configure export_model/import_model) through its entry points, linked
directly, under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer:
round trips, every truncation, byte flips and hostile fields."""

from pathlib import Path

import pytest
from c_programs import ROOT, build_and_run


@pytest.mark.sanitizer
def test_cpu_ref_model_files_are_checked(tmp_path: Path) -> None:
    sources = [str(path.relative_to(ROOT)) for directory in ("plugins/cpu_ref", "plugins/common")
               for path in sorted((ROOT / directory).glob("*.c"))]
    report = build_and_run(["tests/c/test_cpu_ref_model_file.c", *sources],
                           tmp_path / "test_cpu_ref_model_file",
                           ["include", "plugins/common", "plugins/cpu_ref"])
    print(report)
