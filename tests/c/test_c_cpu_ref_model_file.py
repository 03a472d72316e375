"""tests/c/test_cpu_ref_model_file.c: cpu_ref's compiled-model files
(configure export_model/import_model) through its entry points, linked
directly, under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer:
round trips, every truncation, byte flips and hostile fields."""

from pathlib import Path

import pytest
from support.c_programs import build_and_run, cpu_ref_includes, cpu_ref_sources


@pytest.mark.sanitizer
def test_cpu_ref_model_files_are_checked(tmp_path: Path) -> None:
    sources = cpu_ref_sources()
    report = build_and_run(["tests/c/test_cpu_ref_model_file.c", *sources],
                           tmp_path / "test_cpu_ref_model_file",
                           cpu_ref_includes())
    print(report)
