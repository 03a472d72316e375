"""The simulator's cost counters do not depend on how its functional kernels
compute: every workload of support/mlu_counters.py reports, for one
forward, exactly the cycles, simulated time, launches, instructions, DRAM
and host-device bytes, copies and compiles recorded in mlu_counters.json
(written by ``python tests/support/mlu_counters.py`` from the simulator
before its kernels were rewritten for host speed), and outputs whose
summaries agree with the recorded ones within the operator tests'
tolerances; and host threads (num_threads) change neither."""

from __future__ import annotations

import json

import pytest
from support.mlu_counters import (
    CARD,
    COUNTERS,
    EXPECTED,
    SLOW,
    Case,
    cases,
    onnx_model,
    shared_model,
    single_op,
    with_threads,
)

import acc_host as mx

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


# ---- host threads ------------------------------------------------------------------------

# Instructions large enough to be split between host threads (kernels.c,
# mlu_kernel_splits: 128K multiply-adds or elements per instruction, which
# each of these has per image): every kernel that splits, by each of its
# paths.
LARGE = {
    "conv3x3": single_op("Convolution", {"kernel": (3, 3), "pad": (1, 1), "num_filter": 32},
                         (2, 16, 30, 30))[0],
    "conv1x1": single_op("Convolution", {"kernel": (1, 1), "num_filter": 48},
                         (1, 40, 29, 29))[0],
    "conv_depthwise_s2": single_op("Convolution", {"kernel": (3, 3), "stride": (2, 2),
                                                   "pad": (1, 1), "num_filter": 48,
                                                   "num_group": 48}, (1, 48, 57, 57))[1],
    "pool_max": single_op("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pool_type": "max"},
                          (1, 64, 41, 41))[0],
    "pool_avg": single_op("Pooling", {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1),
                                      "pool_type": "avg"}, (1, 64, 24, 24))[1],
    "fc": single_op("FullyConnected", {"num_hidden": 96}, (33, 700))[0],
    "add": single_op("elemwise_add", {}, (4, 64, 600), inputs=2)[0],
    "batchnorm": single_op("BatchNorm", {"fix_gamma": False}, (2, 32, 48, 48))[1],
    "squeezenet1_1": shared_model("squeezenet1_1", 1),
    "resnet_small": onnx_model("resnet_small"),
}


@pytest.mark.parametrize("name", sorted(LARGE))
def test_two_host_threads_change_no_counter_and_no_result(name: str) -> None:
    """Results and counters are the same whatever num_threads: each part of
    a split instruction computes its share exactly as the whole would."""
    one = with_threads(1, LARGE[name])
    two = with_threads(2, LARGE[name])
    assert one == two


def test_num_threads_is_a_checked_card_parameter() -> None:
    ctx = mx.mlu(CARD)
    assert ctx.configure(query="params")["num_threads"] == "1"
    assert "num_threads" in ctx.configure(query="keys")["keys"].split(",")
    try:
        assert ctx.configure(num_threads=16) == {"num_threads": "16"}
        for bad in (0, 17, "two"):
            with pytest.raises(mx.PluginError, match="MX_ACC_ERR_INVALID_ARG"):
                ctx.configure(num_threads=bad)
        # not a compile parameter: compiled models stay valid across it
        assert "num_threads" not in ctx.configure(query="compile_config")["compile_config"]
    finally:
        ctx.configure(num_threads=1)
