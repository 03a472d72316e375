"""cpu_ref runs a batch image by image (every step on image 0, then on image
1, ...) when every step of the model treats axis 0 as independent images:
on one thread when the activations are large, on several as lanes (each
thread taking the next image), a tail of large weights and small
activations on the whole batch. The results are those of the
layer-by-layer run and of the host's CPU path; models with a step that
mixes images stay layer by layer. cpu_ref's ACC_CPU_REF_PROFILE lines show
which (a step printed once per image, with a batch of 1)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from support.paths import MODELS
from support.symbol_weights import host_outputs as _host
from support.symbol_weights import loaded_on_cpu_ref
from support.symbol_weights import random_weights as _weights

import acc_host as mx

RTOL, ATOL = 1e-4, 1e-5
PROFILE = re.compile(r"cpu_ref profile: step (\d+) (\S+) [\d.]+ us in (\d+)")


def _fire_graph() -> mx.sym.Symbol:
    """squeezenet's pattern: a fire module's two convolutions written into
    one Concat, pooling, dropout, a folded BatchNorm with a residual add, a
    classifier; and two more outputs early in the graph, whose memory the
    later steps of the next images must not reuse: one of them the Concat,
    which its two convolutions write in place."""
    data = mx.sym.Variable("data")
    stem = mx.sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1), name="stem")
    stem = mx.sym.Activation(stem, act_type="relu", name="stem_relu")
    squeeze = mx.sym.Convolution(stem, num_filter=4, kernel=(1, 1), name="squeeze")
    squeeze = mx.sym.Activation(squeeze, act_type="relu", name="squeeze_relu")
    left = mx.sym.Convolution(squeeze, num_filter=6, kernel=(1, 1), name="left")
    left = mx.sym.Activation(left, act_type="relu", name="left_relu")
    right = mx.sym.Convolution(squeeze, num_filter=6, kernel=(3, 3), pad=(1, 1), name="right")
    right = mx.sym.Activation(right, act_type="relu", name="right_relu")
    fire = mx.sym.Concat(left, right, dim=1, name="fire")
    pool = mx.sym.Pooling(fire, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool")
    pool = mx.sym.Dropout(pool, p=0.5, name="drop")
    body = mx.sym.Convolution(pool, num_filter=12, kernel=(3, 3), pad=(1, 1), name="body")
    body = mx.sym.BatchNorm(body, fix_gamma=False, eps=1e-3, name="body_bn")
    body = mx.sym.elemwise_add(body, pool, name="add")
    body = mx.sym.clip(body, a_min=0.0, a_max=6.0, name="body_clip")
    dw = mx.sym.Convolution(body, num_filter=12, num_group=12, kernel=(3, 3), stride=(2, 2),
                            pad=(1, 1), name="dw")
    gap = mx.sym.Pooling(dw, global_pool=True, pool_type="avg", kernel=(1, 1), name="gap")
    fc = mx.sym.FullyConnected(mx.sym.Flatten(gap, name="flat"), num_hidden=7, name="fc")
    early = mx.sym.Activation(squeeze, act_type="sigmoid", name="early")
    return mx.sym.Group([mx.sym.softmax(fc, name="prob"), early, fire])


def _fire_case(batch: int, seed: int) -> tuple[mx.sym.Symbol, np.ndarray, dict]:
    """_fire_graph, a batch of images for it and its weights."""
    sym = _fire_graph()
    data = np.random.default_rng(seed).standard_normal((batch, 3, 14, 14)).astype(np.float32)
    return sym, data, _weights(sym, {"data": data.shape}, seed=seed + 1)


def _run(sym: mx.sym.Symbol, data: np.ndarray, weights: dict, threads: int,
         split: str | None, monkeypatch: pytest.MonkeyPatch,
         capfd: pytest.CaptureFixture[str]) -> tuple[list[np.ndarray], list[tuple[str, int]]]:
    """The model's outputs on cpu_ref, and (op, batch of its input) for each
    step it ran, in order."""
    if split is None:
        monkeypatch.delenv("ACC_CPU_REF_IMAGE_SPLIT", raising=False)
    else:
        monkeypatch.setenv("ACC_CPU_REF_IMAGE_SPLIT", split)
    monkeypatch.setenv("ACC_CPU_REF_PROFILE", "1")
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        capfd.readouterr()
        outputs = [np.array(value) for value in model.infer({"data": data}).values()]
        steps = [(m[2], int(m[3])) for m in PROFILE.finditer(capfd.readouterr().err)]
    return outputs, steps


def test_a_batch_runs_image_by_image_with_the_layer_by_layer_results(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    sym, data, weights = _fire_case(5, seed=0)
    split, split_steps = _run(sym, data, weights, 1, "1", monkeypatch, capfd)
    whole, whole_steps = _run(sym, data, weights, 1, "0", monkeypatch, capfd)
    # Image by image: every step five times, on a batch of 1.
    assert split_steps and all(batch == 1 for _, batch in split_steps)
    assert len(split_steps) == 5 * len(whole_steps)
    assert all(batch == 5 for _, batch in whole_steps)
    for ours, layered, host in zip(split, whole, _host(sym, data, weights)):
        assert ours.shape == host.shape
        np.testing.assert_allclose(ours, layered, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(ours, host, rtol=RTOL, atol=ATOL)


def test_on_one_thread_small_activations_stay_layer_by_layer_and_large_ones_split(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    sym, data, weights = _fire_case(3, seed=2)
    _, steps = _run(sym, data, weights, 1, None, monkeypatch, capfd)
    assert steps and all(batch == 3 for _, batch in steps)
    # 2 x 128 x 128 x 128 floats (16 MiB) from one convolution: split.
    big = mx.sym.Convolution(mx.sym.Variable("data"), num_filter=128, kernel=(1, 1), name="wide")
    big = mx.sym.Pooling(mx.sym.Activation(big, act_type="relu", name="wide_relu"),
                         kernel=(4, 4), stride=(4, 4), pool_type="avg", name="shrink")
    data = np.random.default_rng(4).standard_normal((2, 4, 128, 128)).astype(np.float32)
    weights = _weights(big, {"data": data.shape}, seed=5)
    (out,), steps = _run(big, data, weights, 1, None, monkeypatch, capfd)
    assert len(steps) == 2 * 2 and all(batch == 1 for _, batch in steps)
    np.testing.assert_allclose(out, _host(big, data, weights)[0], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("threads", [2, 3])
def test_threads_run_the_images_as_lanes_with_the_one_thread_results(
        threads: int, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """On several threads each thread takes the next image not yet taken
    and runs every step on it, in memory of its own: the same results, bit
    for bit, as one thread image by image (each step on one thread)."""
    sym, data, weights = _fire_case(5, seed=6)
    lanes, lane_steps = _run(sym, data, weights, threads, "1", monkeypatch, capfd)
    alone, alone_steps = _run(sym, data, weights, 1, "1", monkeypatch, capfd)
    assert len(lane_steps) == len(alone_steps) and all(batch == 1 for _, batch in lane_steps)
    assert sorted(lane_steps) == sorted(alone_steps)
    for ours, single, host in zip(lanes, alone, _host(sym, data, weights)):
        assert ours.tobytes() == single.tobytes()
        np.testing.assert_allclose(ours, host, rtol=RTOL, atol=ATOL)
    # Lanes are the default on several threads, small activations or not.
    lanes, lane_steps = _run(sym, data, weights, threads, None, monkeypatch, capfd)
    assert len(lane_steps) == len(alone_steps) and all(batch == 1 for _, batch in lane_steps)
    for ours, single in zip(lanes, alone):
        assert ours.tobytes() == single.tobytes()
    # With a tail on the batch, which then runs on the threads.
    sym = _tail_graph()
    data = np.random.default_rng(12).standard_normal((3, 3, 256, 256)).astype(np.float32)
    weights = _weights(sym, {"data": data.shape}, seed=13)
    (lanes,), steps = _run(sym, data, weights, threads, None, monkeypatch, capfd)
    assert steps[-1] == ("FullyConnected", 3) and len(steps) == 3 * 5 + 1
    (alone,), _ = _run(sym, data, weights, 1, None, monkeypatch, capfd)
    np.testing.assert_allclose(lanes, alone, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lanes, _host(sym, data, weights)[0], rtol=RTOL, atol=ATOL)


def test_models_that_mix_images_stay_layer_by_layer(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    data = np.random.default_rng(6).standard_normal((4, 3, 14, 14)).astype(np.float32)
    # A softmax over axis 0 (every entry still has the batch as axis 0), and
    # a reshape merging the batch into rows: outputs depend on every image.
    x = mx.sym.Variable("data")
    conv = mx.sym.Convolution(x, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv")
    for mixed, count in ((mx.sym.softmax(conv, axis=0, name="batch_prob"), 2),
                         (mx.sym.softmax(mx.sym.Reshape(conv, shape=(-1, 14), name="rows"),
                                         axis=1, name="rows_prob"), 2)):
        weights = _weights(mixed, {"data": data.shape}, seed=8)
        (out,), steps = _run(mixed, data, weights, 1, "1", monkeypatch, capfd)
        assert [op for op, _ in steps][0] == "Convolution" and steps[0][1] == 4
        # each step once; the reshape runs no step (its output views the
        # convolution's memory)
        assert len(steps) == count
        np.testing.assert_allclose(out, _host(mixed, data, weights)[0], rtol=RTOL, atol=ATOL)


def _tail_graph() -> mx.sym.Symbol:
    """Large early activations, then a classifier with 4 MiB of weights on a
    small input: the classifier runs once on the batch, the rest per image.
    The pooled features the classifier reads lie, in the memory plan, where
    the first convolution's output lay: the next image's first step would
    overwrite image 0's features unless they are kept apart."""
    data = mx.sym.Variable("data")
    left = mx.sym.Activation(mx.sym.Convolution(data, num_filter=1, kernel=(1, 1), name="a"),
                             act_type="relu", name="a_relu")
    right = mx.sym.Activation(mx.sym.Convolution(data, num_filter=1, kernel=(1, 1), name="b"),
                              act_type="relu", name="b_relu")
    both = mx.sym.elemwise_add(left, right, name="both")
    wide = mx.sym.Convolution(both, num_filter=32, kernel=(1, 1), name="wide")
    pooled = mx.sym.Pooling(wide, kernel=(4, 4), stride=(4, 4), pool_type="max", name="pooled")
    return mx.sym.FullyConnected(pooled, num_hidden=8, name="classifier")


def test_a_tail_with_large_weights_and_small_activations_runs_on_the_batch(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    sym = _tail_graph()
    data = np.random.default_rng(10).standard_normal((2, 3, 256, 256)).astype(np.float32)
    weights = _weights(sym, {"data": data.shape}, seed=11)
    (ours,), steps = _run(sym, data, weights, 1, None, monkeypatch, capfd)
    per_image = [("Convolution", 1), ("Convolution", 1), ("elemwise_add", 1),
                 ("Convolution", 1), ("Pooling", 1)]
    assert steps == per_image * 2 + [("FullyConnected", 2)]
    (whole,), steps = _run(sym, data, weights, 1, "0", monkeypatch, capfd)
    assert all(batch == 2 for _, batch in steps)
    (split,), steps = _run(sym, data, weights, 1, "1", monkeypatch, capfd)
    assert steps == (per_image + [("FullyConnected", 1)]) * 2
    host = _host(sym, data, weights)[0]
    for result in (ours, whole, split):
        np.testing.assert_allclose(result, host, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ours, whole, rtol=1e-6, atol=1e-6)


def test_mobilenetv2_runs_its_7x7_layers_and_classifier_on_the_batch(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The shared MXNet model at batch 2: the layers up to the last stride-2
    depthwise run per image, the 7 x 7 layers (0.6-5 MB of filters each)
    and the classifier on the batch. Image 0 is the input MXNet computed its
    output for; image 1 the same mirrored, checked against its own batch-1
    run (which is not split)."""
    folder = MODELS / "mobilenetv2_1_0"
    image = np.load(folder / "input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    weights = {key: value.asnumpy() for key, value in {**arg_params, **aux_params}.items()}
    data = np.concatenate([image, image[..., ::-1]])
    (ours,), steps = _run(sym, data, weights, 1, None, monkeypatch, capfd)
    batched = [k for k, (_, batch) in enumerate(steps) if batch == 2]
    assert batched and batched == list(range(batched[0], len(steps)))
    split = steps[:batched[0]]
    assert len(split) % 2 == 0 and split[:len(split) // 2] == split[len(split) // 2:]
    assert all(batch == 1 for _, batch in split)
    assert [op for op, _ in steps[batched[0]:]][-3:] == ["Pooling", "Convolution", "Flatten"]
    np.testing.assert_allclose(ours[:1], np.load(folder / "expected_0.npy"), rtol=1e-4, atol=1e-5)
    (mirrored,), _ = _run(sym, np.ascontiguousarray(data[1:]), weights, 1, None, monkeypatch,
                          capfd)
    np.testing.assert_allclose(ours[1:], mirrored, rtol=1e-5, atol=1e-6)
