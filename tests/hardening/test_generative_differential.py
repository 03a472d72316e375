"""Random small graphs run on three back ends must agree: the host's CPU
path, cpu_ref and mlu_sim, each in symbolic mode (simple_bind + forward).

hypothesis builds DAGs of Convolution, Pooling, Concat, elemwise_add,
Activation, BatchNorm, Flatten, FullyConnected, Reshape, slice and
SliceChannel over random shapes with mx.sym. The graphs reach the places
where cpu_ref's memory plan lets entries alias: Concats written in place
into their output and Concats of those (views of views), a value read by
two Concats, Concat outputs read by other operators or returned, Concats
of the data input, convolutions with a folded BatchNorm, a fused residual
add and a fused relu, entries sharing the arena once dead, and, at batch 8
with image by image forced on (ACC_CPU_REF_IMAGE_SPLIT=1) and 2 threads,
the lanes and the entries that stay in place from image to image. Half of
the graphs use only the operators that let cpu_ref run a batch image by
image (no Reshape, slice or SliceChannel).

Among the drawn operators is Inception's E block (branches, two of them
concatenated, that concatenated again with the others): with cpu_ref's
views of views left unresolved, the default run fails within its first
150 examples, and shrinks to Concat(conv, Concat(conv, conv)) on a 1x1x1x1
input.

The number of examples is ACC_HOST_HYPOTHESIS_EXAMPLES (default 300, about
25 s on two cores); CI sets more. The run is derandomized and keeps no
example database, so a given count always draws the same graphs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.symbol_weights import random_weights

import acc_host as mx

EXAMPLES = int(os.environ.get("ACC_HOST_HYPOTHESIS_EXAMPLES", "300"))
RTOL, ATOL = 1e-3, 1e-4

KERNELS = [(1, 1), (3, 3), (1, 3), (3, 1)]
PER_IMAGE_OPS = ["conv", "conv", "branches", "block", "pool", "concat", "concat", "concat",
                 "add", "act", "bn", "flatten", "fc"]
ALL_OPS = [*PER_IMAGE_OPS, "reshape", "slice", "split"]


@dataclass
class Program:
    """A drawn graph: its symbol, the data input's shape, how cpu_ref runs
    it, and one line per operator (what hypothesis prints for a failure)."""

    batch: int
    data_shape: tuple[int, ...]
    threads: int
    split: str | None
    lines: list[str] = field(default_factory=list)
    symbol: mx.sym.Symbol | None = None

    def __repr__(self) -> str:
        head = (f"data {self.data_shape}, cpu_ref on {self.threads} thread(s), "
                f"ACC_CPU_REF_IMAGE_SPLIT={self.split}")
        return "\n".join([head, *self.lines])


class _Builder:
    """The values of a graph being drawn: (symbol, shape, name)."""

    def __init__(self, draw, program: Program) -> None:
        self.draw, self.program = draw, program
        self.values = [(mx.sym.Variable("data"), program.data_shape, "data")]
        self.consumed: set[int] = set()

    def pick(self, indices: list[int]) -> int:
        """One of indices, the later values more often (so that operators
        chain rather than all reading the data)."""
        if len(indices) > 3 and self.often():
            indices = indices[-3:]
        k = self.draw(st.integers(0, len(indices) - 1))
        return indices[len(indices) - 1 - k]

    def add(self, symbol, shape: tuple[int, ...], name: str, text: str, inputs: list[int]) -> None:
        self.consumed.update(inputs)
        self.values.append((symbol, tuple(shape), name))
        self.program.lines.append(f"{name} {tuple(shape)} = {text}")

    def often(self) -> bool:
        """True four times in five (hypothesis draws the bounds of a range
        more often than its middle, so the rare case is one bound)."""
        return self.draw(st.integers(0, 4)) < 4

    def name_of(self, k: int) -> str:
        return self.values[k][2]


def _conv(b: _Builder, name: str, k: int) -> None:
    x, shape, _ = b.values[k]
    kernel = b.draw(st.sampled_from(KERNELS))
    pad = (kernel[0] // 2, kernel[1] // 2)
    filters = b.draw(st.integers(1, 5))
    no_bias = b.draw(st.booleans())
    y = mx.sym.Convolution(x, num_filter=filters, kernel=kernel, pad=pad, no_bias=no_bias,
                           name=name)
    b.add(y, (shape[0], filters, *shape[2:]), name,
          f"Convolution({b.name_of(k)}, {filters} filters, kernel {kernel}, pad {pad}"
          f"{', no bias' if no_bias else ''})", [k])


def _pool(b: _Builder, name: str, k: int) -> None:
    x, shape, _ = b.values[k]
    kind = b.draw(st.sampled_from(["max", "avg"]))
    form = b.draw(st.sampled_from(["same", "global", "halve"]))
    if form == "halve" and min(shape[2:]) < 2:
        form = "same"
    if form == "same":
        y = mx.sym.Pooling(x, kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type=kind, name=name)
        out = shape
    elif form == "global":
        y = mx.sym.Pooling(x, kernel=(1, 1), global_pool=True, pool_type=kind, name=name)
        out = (*shape[:2], 1, 1)
    else:
        y = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type=kind, name=name)
        out = (*shape[:2], (shape[2] - 2) // 2 + 1, (shape[3] - 2) // 2 + 1)
    b.add(y, out, name, f"Pooling({b.name_of(k)}, {kind}, {form})", [k])


def _concat(b: _Builder, name: str, k: int, per_image: bool) -> None:
    shape = b.values[k][1]
    axes = list(range(1, len(shape))) + ([] if per_image else [0])
    axis = b.draw(st.sampled_from(axes))

    def fits(other: tuple[int, ...]) -> bool:
        return len(other) == len(shape) and all(
            a == c for d, (a, c) in enumerate(zip(shape, other)) if d != axis)

    # Mostly distinct values no operator reads yet: a Concat of values only
    # it reads is the one cpu_ref writes in place.
    candidates = [j for j, (_, other, _) in enumerate(b.values) if fits(other) and j != k]
    fresh = [j for j in candidates if j not in b.consumed and j > 0]
    if fresh and b.often():
        candidates = fresh
    others = b.draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=2, unique=True)
                    ) if candidates else []
    if not others or not b.often():
        others.append(k)  # a value twice
    inputs = [k, *others]
    order = b.draw(st.permutations(inputs))
    y = mx.sym.Concat(*[b.values[j][0] for j in order], dim=axis, name=name)
    out = list(shape)
    out[axis] = sum(b.values[j][1][axis] for j in order)
    b.add(y, out, name, f"Concat({', '.join(b.name_of(j) for j in order)}, dim={axis})", order)


def _add(b: _Builder, name: str, k: int) -> None:
    shape = b.values[k][1]
    other = b.pick([j for j, (_, s, _) in enumerate(b.values) if s == shape])
    y = mx.sym.elemwise_add(b.values[k][0], b.values[other][0], name=name)
    b.add(y, shape, name, f"elemwise_add({b.name_of(k)}, {b.name_of(other)})", [k, other])


def _act(b: _Builder, name: str, k: int) -> None:
    kind = b.draw(st.sampled_from(["relu", "relu", "sigmoid", "tanh"]))
    y = mx.sym.Activation(b.values[k][0], act_type=kind, name=name)
    b.add(y, b.values[k][1], name, f"Activation({b.name_of(k)}, {kind})", [k])


def _bn(b: _Builder, name: str, k: int) -> None:
    y = mx.sym.BatchNorm(b.values[k][0], fix_gamma=False, eps=1e-3, name=name)
    b.add(y, b.values[k][1], name, f"BatchNorm({b.name_of(k)})", [k])


def _flatten(b: _Builder, name: str, k: int) -> None:
    shape = b.values[k][1]
    y = mx.sym.Flatten(b.values[k][0], name=name)
    b.add(y, (shape[0], int(np.prod(shape[1:]))), name, f"Flatten({b.name_of(k)})", [k])


def _fc(b: _Builder, name: str, k: int) -> None:
    hidden = b.draw(st.integers(1, 6))
    y = mx.sym.FullyConnected(b.values[k][0], num_hidden=hidden, name=name)
    b.add(y, (b.values[k][1][0], hidden), name,
          f"FullyConnected({b.name_of(k)}, {hidden} hidden)", [k])


def _reshape(b: _Builder, name: str, k: int) -> None:
    shape = b.values[k][1]
    if len(shape) == 4 and b.draw(st.booleans()):
        target = (0, shape[1] * shape[2], shape[3], 1)
        out = (shape[0], shape[1] * shape[2], shape[3], 1)
    else:
        target, out = (0, -1), (shape[0], int(np.prod(shape[1:])))
    y = mx.sym.Reshape(b.values[k][0], shape=target, name=name)
    b.add(y, out, name, f"Reshape({b.name_of(k)}, {target})", [k])


def _slice(b: _Builder, name: str, k: int) -> None:
    shape = b.values[k][1]
    begin = b.draw(st.integers(0, shape[1] - 1))
    end = b.draw(st.integers(begin + 1, shape[1]))
    rest = (None,) * (len(shape) - 2)
    y = mx.sym.slice(b.values[k][0], begin=(None, begin, *rest), end=(None, end, *rest),
                     name=name)
    b.add(y, (shape[0], end - begin, *shape[2:]), name,
          f"slice({b.name_of(k)}, channels {begin}:{end})", [k])


def _split(b: _Builder, name: str, k: int) -> None:
    shape = b.values[k][1]
    parts = b.draw(st.sampled_from([n for n in range(1, shape[1] + 1) if shape[1] % n == 0]))
    y = mx.sym.SliceChannel(b.values[k][0], num_outputs=parts, axis=1, name=name)
    b.consumed.add(k)
    out = (shape[0], shape[1] // parts, *shape[2:])
    for p in range(parts):
        b.values.append((y[p] if parts > 1 else y, out, f"{name}[{p}]"))
    b.program.lines.append(f"{name}[0..{parts - 1}] {out} = SliceChannel({b.name_of(k)}, "
                           f"{parts} parts)")


def _branches(b: _Builder, name: str, k: int) -> None:
    """Two or three operators reading one value (Inception's branches), left
    for later operators, Concats most likely, to read."""
    for j in range(b.draw(st.integers(2, 3))):
        step = b.draw(st.sampled_from([_conv, _conv, _pool, _act]))
        step(b, f"{name}_{j}", k)


def _block(b: _Builder, name: str, k: int) -> None:
    """Inception's E block: three or four branches from one value, keeping
    its height and width; two of them concatenated on the channels, and
    that concatenated again with the others."""
    x, shape, _ = b.values[k]
    branches = []
    for j in range(b.draw(st.integers(3, 4))):
        branch = f"{name}_{j}"
        kernel = b.draw(st.sampled_from(KERNELS))
        pad = (kernel[0] // 2, kernel[1] // 2)
        filters = b.draw(st.integers(1, 4))
        y = mx.sym.Convolution(x, num_filter=filters, kernel=kernel, pad=pad, name=branch)
        b.add(y, (shape[0], filters, *shape[2:]), branch,
              f"Convolution({b.name_of(k)}, {filters} filters, kernel {kernel}, pad {pad})", [k])
        branches.append(len(b.values) - 1)
    order = b.draw(st.permutations(branches))

    def concat(parts: list[int], label: str) -> int:
        y = mx.sym.Concat(*[b.values[j][0] for j in parts], dim=1, name=label)
        out = (shape[0], sum(b.values[j][1][1] for j in parts), *shape[2:])
        b.add(y, out, label, f"Concat({', '.join(b.name_of(j) for j in parts)}, dim=1)", parts)
        return len(b.values) - 1

    inner = concat(order[1:3], f"{name}_pair")
    outer = [order[0], inner, *order[3:]]
    concat(b.draw(st.permutations(outer)), f"{name}_cat")


STEPS = {"conv": _conv, "branches": _branches, "block": _block, "pool": _pool, "add": _add,
         "act": _act, "bn": _bn, "flatten": _flatten, "fc": _fc, "reshape": _reshape,
         "slice": _slice, "split": _split}


@st.composite
def programs(draw) -> Program:
    batch = draw(st.sampled_from([1, 8, 2]))
    program = Program(batch=batch,
                      data_shape=(batch, draw(st.integers(1, 4)), draw(st.integers(1, 6)),
                                  draw(st.integers(1, 6))),
                      threads=draw(st.sampled_from([2, 1])),
                      split=draw(st.sampled_from(["1", None, "0"])))
    per_image = draw(st.booleans())
    b = _Builder(draw, program)
    for i in range(draw(st.integers(1, 10))):
        name = f"n{i}"
        op = draw(st.sampled_from(PER_IMAGE_OPS if per_image else ALL_OPS))
        four = [j for j, (_, s, _) in enumerate(b.values) if len(s) == 4]
        spatial = op in ("conv", "branches", "block", "pool", "flatten")
        if spatial and not four:
            op = "act"
            spatial = False
        k = b.pick(four if spatial else list(range(len(b.values))))
        if op == "concat":
            fresh = [j for j in range(1, len(b.values)) if j not in b.consumed]
            if fresh and b.often():
                k = b.pick(fresh)
            _concat(b, name, k, per_image)
        else:
            STEPS[op](b, name, k)
    heads = [j for j in range(1, len(b.values)) if j not in b.consumed]
    # Sometimes an intermediate value is an output too (cpu_ref keeps
    # outputs out of Concat views and apart when a batch is split).
    if len(b.values) > 2 and draw(st.booleans()):
        extra = draw(st.integers(1, len(b.values) - 1))
        if extra not in heads:
            heads.insert(0, extra)
    program.lines.append("outputs: " + ", ".join(b.name_of(j) for j in heads))
    program.symbol = mx.sym.Group([b.values[j][0] for j in heads])
    return program


def _forward(program: Program, ctx: mx.Context, data: np.ndarray,
             weights: dict[str, np.ndarray]) -> list[np.ndarray]:
    exe = program.symbol.simple_bind(ctx, data=data.shape)
    for key, value in weights.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    return [out.asnumpy() for out in exe.forward(data=data)]


def _compare(name: str, results: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(results) == len(expected), name
    for k, (result, reference) in enumerate(zip(results, expected)):
        assert result.shape == reference.shape, (name, k, result.shape, reference.shape)
        scale = max(1.0, float(np.abs(reference).max(initial=0.0)))
        np.testing.assert_allclose(result, reference, rtol=RTOL, atol=ATOL * scale,
                                   err_msg=f"{name}, output {k}")


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_random_graphs_agree_on_cpu_cpu_ref_and_mlu_sim(program: Program) -> None:
    data = np.random.default_rng(1).standard_normal(program.data_shape).astype(np.float32)
    weights = random_weights(program.symbol, {"data": data.shape}, seed=2)
    expected = _forward(program, mx.cpu(), data, weights)
    saved = os.environ.get("ACC_CPU_REF_IMAGE_SPLIT")
    if program.split is None:
        os.environ.pop("ACC_CPU_REF_IMAGE_SPLIT", None)
    else:
        os.environ["ACC_CPU_REF_IMAGE_SPLIT"] = program.split
    mx.cpu_ref(0).configure(num_threads=program.threads)
    try:
        _compare("cpu_ref", _forward(program, mx.cpu_ref(0), data, weights), expected)
    finally:
        mx.cpu_ref(0).configure(num_threads=1)
        if saved is None:
            os.environ.pop("ACC_CPU_REF_IMAGE_SPLIT", None)
        else:
            os.environ["ACC_CPU_REF_IMAGE_SPLIT"] = saved
    _compare("mlu_sim", _forward(program, mx.mlu(0), data, weights), expected)
