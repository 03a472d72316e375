"""cpu_ref's memory plan gives a reshape-like step (Reshape, Flatten,
squeeze, expand_dims, a transpose moving only extent-1 axes) its input's
memory and runs no step for it, when the input is an operator output of
the model and the reshaped value no graph output. The aliasing must not
change a value: the input's memory lives as long as either name is read,
graph outputs get memory of their own, weights and graph inputs keep their
copies. Each case runs against the host's CPU path and counts the steps
cpu_ref ran (ACC_CPU_REF_PROFILE lines)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support.symbol_weights import host_outputs as _host
from support.symbol_weights import loaded_on_cpu_ref
from support.symbol_weights import random_weights as _weights

import acc_host as mx

RTOL, ATOL = 1e-5, 1e-6
PROFILE = re.compile(r"cpu_ref profile: step \d+ (\S+) [\d.]+ us")
SHAPE = (2, 4, 6, 6)


def _steps_and_outputs(sym: mx.sym.Symbol, monkeypatch: pytest.MonkeyPatch,
                       capfd: pytest.CaptureFixture[str],
                       seed: int = 0) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
    """The ops of the steps cpu_ref ran, its outputs and the host's."""
    data = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
    weights = _weights(sym, {"data": data.shape}, seed=seed + 1)
    monkeypatch.setenv("ACC_CPU_REF_PROFILE", "1")
    with loaded_on_cpu_ref(sym, data, weights, 1) as model:
        capfd.readouterr()
        ours = [np.array(value) for value in model.infer({"data": data}).values()]
        steps = PROFILE.findall(capfd.readouterr().err)
    return steps, ours, _host(sym, data, weights)


def _check(ours: list[np.ndarray], theirs: list[np.ndarray]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def _conv(x: mx.sym.Symbol, name: str) -> mx.sym.Symbol:
    return mx.sym.Convolution(x, num_filter=4, kernel=(3, 3), pad=(1, 1), name=name)


def test_a_reshape_keeps_its_input_alive_past_the_input_last_reader(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    # x's last direct reader is the tanh; three steps of x's size follow,
    # which the plan would place over x's bytes if the reshape's reader at
    # the end did not keep them.
    x = mx.sym.Activation(_conv(mx.sym.Variable("data"), "conv"), act_type="sigmoid", name="x")
    flat = mx.sym.Reshape(x, shape=(2, -1), name="flat")
    y = mx.sym.Activation(x, act_type="tanh", name="y")
    y = mx.sym.Activation(y, act_type="relu", name="y2")
    y = mx.sym.exp(y, name="y3")
    out = mx.sym.elemwise_add(mx.sym.Flatten(y, name="yflat"), flat, name="out")
    steps, ours, theirs = _steps_and_outputs(out, monkeypatch, capfd)
    _check(ours, theirs)
    assert "Reshape" not in steps and "Flatten" not in steps


def test_a_reshape_read_by_a_concat_written_in_place(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    # The Concat's inputs are written into its output (its own view); the
    # reshaped value is one of them and is then copied there; its input is
    # read again after the Concat.
    data = mx.sym.Variable("data")
    x = mx.sym.Activation(_conv(data, "a"), act_type="relu", name="x")
    other = mx.sym.Activation(_conv(data, "b"), act_type="relu", name="other")
    back = mx.sym.Reshape(mx.sym.Reshape(x, shape=(2, -1)), shape=SHAPE, name="back")
    cat = mx.sym.Concat(back, other, dim=1, name="cat")
    out = mx.sym.Group([mx.sym.sigmoid(cat, name="s"), mx.sym.tanh(x, name="t")])
    steps, ours, theirs = _steps_and_outputs(out, monkeypatch, capfd, seed=2)
    _check(ours, theirs)


def test_a_reshape_that_is_a_graph_output_gets_its_own_memory(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    x = mx.sym.Activation(_conv(mx.sym.Variable("data"), "conv"), act_type="sigmoid", name="x")
    flat = mx.sym.Reshape(x, shape=(2, -1), name="flat")
    # x is read in place by nothing, but a later step's output could be
    # placed over it once its readers are done; the graph output must hold.
    later = mx.sym.Activation(mx.sym.tanh(x, name="t"), act_type="relu", name="r")
    steps, ours, theirs = _steps_and_outputs(mx.sym.Group([flat, later]), monkeypatch, capfd,
                                             seed=4)
    _check(ours, theirs)
    assert steps.count("Reshape") == 1  # copied into the output's own memory


def test_two_reshapes_of_one_input(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    x = mx.sym.Activation(_conv(mx.sym.Variable("data"), "conv"), act_type="relu", name="x")
    first = mx.sym.Reshape(x, shape=(2, -1), name="first")
    second = mx.sym.expand_dims(mx.sym.Reshape(x, shape=(-1, 6), name="second"), axis=0)
    second = mx.sym.transpose(second, axes=(1, 0, 2), name="second_t")  # moves extent 1 only
    out = mx.sym.Group([mx.sym.sigmoid(first, name="s1"), mx.sym.tanh(second, name="s2"),
                        mx.sym.exp(mx.sym.squeeze(second, axis=1), name="s3")])
    steps, ours, theirs = _steps_and_outputs(out, monkeypatch, capfd, seed=6)
    _check(ours, theirs)
    assert not {"Reshape", "expand_dims", "transpose", "squeeze"} & set(steps)


def test_a_transpose_that_moves_data_still_runs(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    x = mx.sym.Activation(_conv(mx.sym.Variable("data"), "conv"), act_type="relu", name="x")
    out = mx.sym.sigmoid(mx.sym.transpose(x, axes=(0, 2, 1, 3), name="t"), name="s")
    steps, ours, theirs = _steps_and_outputs(out, monkeypatch, capfd, seed=8)
    _check(ours, theirs)
    assert "transpose" in steps


def test_reshapes_of_a_weight_and_of_the_data_are_copied(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    data = mx.sym.Variable("data")
    scale = mx.sym.Variable("scale", shape=(4 * 36,))
    flat = mx.sym.Reshape(data, shape=(2, -1), name="flat")
    out = mx.sym.broadcast_mul(flat, mx.sym.Reshape(scale, shape=(1, -1), name="scale_row"),
                               name="out")
    steps, ours, theirs = _steps_and_outputs(mx.sym.Group([out, mx.sym.sigmoid(flat)]),
                                             monkeypatch, capfd, seed=10)
    _check(ours, theirs)
    assert steps.count("Reshape") == 2
