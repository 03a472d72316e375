"""tests/c/test_mlu_team.c: the mlu simulator's team of host threads
(plugins/mlu_sim/team.c), which takes the parts of a split instruction with
atomic operations, under AddressSanitizer and UndefinedBehaviorSanitizer:
every part of every run taken exactly once over claims of 1 to 3 helpers,
worker indices within the claim, a busy team refusing a second claim, and
two teams driven from two threads at once."""

from pathlib import Path

import pytest
from support.c_programs import ROOT, build_and_run


@pytest.mark.sanitizer
def test_mlu_team_takes_every_part_once(tmp_path: Path) -> None:
    sources = [str(path.relative_to(ROOT)) for directory in ("plugins/mlu_sim", "plugins/common")
               for path in sorted((ROOT / directory).glob("*.c"))]
    report = build_and_run(["tests/c/test_mlu_team.c", *sources], tmp_path / "test_mlu_team",
                           ["include", "plugins/common", "plugins/mlu_sim"])
    print(report)
