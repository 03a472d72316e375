"""tests/c/test_mlu_model_file.c: mlu_sim's offline models (configure
export_model/import_model, plugins/mlu_sim/model_file.c) through its entry
points, linked directly, under AddressSanitizer, LeakSanitizer and
UndefinedBehaviorSanitizer: round trips on the same and another card without
compiling, weight updates after import, every truncation and bit flip,
hostile length and instruction fields."""

from pathlib import Path

import pytest
from support.c_programs import ROOT, build_and_run


@pytest.mark.sanitizer
def test_mlu_offline_model_files_are_checked(tmp_path: Path) -> None:
    sources = [str(path.relative_to(ROOT)) for directory in ("plugins/mlu_sim", "plugins/common")
               for path in sorted((ROOT / directory).glob("*.c"))]
    report = build_and_run(["tests/c/test_mlu_model_file.c", *sources],
                           tmp_path / "test_mlu_model_file",
                           ["include", "plugins/common", "plugins/mlu_sim"])
    print(report)
