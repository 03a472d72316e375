"""Where a gluon LSTM export's RNN runs, and why (the explain output):
cpu_ref accepts RNN and the parameter concat; mlu_sim declines both (its
cost model has no recurrent kernel), so they run on the CPU, and explain
names supportedOps' refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.cli.partition_cmd import refiner

MODELS = Path(__file__).resolve().parents[1] / "models" / "rnn"


def _explained(ctx: mx.Context) -> dict[str, tuple[str, str, str]]:
    io = np.load(MODELS / "lstm_bi2-io.npz")
    inputs = sorted(key[len("input_"):] for key in io if key.startswith("input_"))
    symbol = mx.sym.load(str(MODELS / "lstm_bi2-symbol.json"))
    loaded = mx.nd.load(str(MODELS / "lstm_bi2-0000.params"))
    args = {key[4:]: value.as_in_context(ctx) for key, value in loaded.items()}
    args.update({key: mx.nd.array(io[f"input_{key}"], ctx=ctx) for key in inputs})
    executor = symbol.bind(ctx, args)
    outputs = executor.forward()
    np.testing.assert_allclose(outputs[0].asnumpy(), io["output_0"], rtol=1e-5, atol=1e-6)
    partition = executor.partition
    explanation = partition.explain(refiner(ctx.library, partition))
    return {reason.op: (reason.where, reason.kind, reason.reason)
            for reason in explanation.nodes if reason.op in ("RNN", "_rnn_param_concat")}


def test_cpu_ref_runs_the_rnn() -> None:
    explained = _explained(mx.cpu_ref(0))
    assert explained["RNN"][:2] == ("cpu_ref(0)", "offloaded")
    assert explained["_rnn_param_concat"][:2] == ("cpu_ref(0)", "offloaded")


def test_mlu_declines_the_rnn_and_explain_says_so() -> None:
    try:
        ctx = mx.mlu(0)
    except AttributeError:
        pytest.skip("the bundled mlu plugin is not loaded")
    where, kind, reason = _explained(ctx)["RNN"]
    assert (where, kind) == ("cpu(0)", "unsupported_op")
    assert "supportedOps on mlu(0) does not accept RNN" in reason
