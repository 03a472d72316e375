"""The simulator's cost counters do not depend on how its functional kernels
compute: every workload of support/mlu_counters.py reports, for one
forward, exactly the cycles, simulated time, launches, instructions, DRAM
and host-device bytes, copies and compiles recorded in mlu_counters.json
(written by ``python tests/support/mlu_counters.py`` from the simulator
before its kernels were rewritten for host speed), and outputs whose
summaries agree with the recorded ones within the operator tests'
tolerances."""

from __future__ import annotations

import json

import pytest
from support.mlu_counters import COUNTERS, EXPECTED, SLOW, Case, cases

EXPECTED_COUNTERS = json.loads(EXPECTED.read_text(encoding="utf-8"))
CASES = cases()


def _marks(case: Case) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if case.name in SLOW else []


def test_every_recorded_workload_is_measured() -> None:
    assert sorted(case.name for case in CASES) == sorted(EXPECTED_COUNTERS)


@pytest.mark.parametrize("case", [pytest.param(case, id=case.name, marks=_marks(case))
                                  for case in CASES])
def test_counters_and_outputs_match_the_recorded_simulator(case: Case) -> None:
    expected = EXPECTED_COUNTERS[case.name]
    measured = case.run()
    assert {key: measured[key] for key in COUNTERS} == {key: expected[key] for key in COUNTERS}
    # fp16 workloads round their stored results: 1e-2 as the fp16 operator
    # tests; int8 ones quantize the same values the same way.
    rtol = 1e-2 if "fp16" in case.name else 1e-4
    for key in ("output_abs_sum", "output_abs_max"):
        assert measured[key] == pytest.approx(expected[key], rel=rtol, abs=1e-5), key
