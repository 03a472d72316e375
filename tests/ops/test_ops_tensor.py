"""Tensor operators (acc_host.ops.tensor) against independent oracles:
expected values written out by hand (most from the examples in MXNet's
operator documentation) and numpy expressions written directly here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acc_host.errors import OperatorError, ShapeError
from acc_host.ops import registry

RNG = np.random.default_rng(20240601)
F32 = np.dtype(np.float32)


def rand(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def run(name: str, attrs: dict[str, str] | None = None, *inputs: np.ndarray) -> list[np.ndarray]:
    """Runs an operator and checks its outputs against its own shape and
    dtype inference."""
    op = registry.get(name)
    parsed = op.parse(attrs or {})
    _, out_shapes = op.infer_shape(parsed, [x.shape for x in inputs])
    _, out_types = op.infer_type(parsed, [x.dtype for x in inputs])
    outputs = op.run(parsed, inputs)
    assert [out.shape for out in outputs] == [tuple(s) for s in out_shapes]
    assert [out.dtype for out in outputs] == list(out_types)
    assert len(outputs) == len(op.output_names(parsed))
    for out in outputs:
        assert out.flags.c_contiguous
        assert not any(np.shares_memory(out, x) for x in inputs)
    return outputs


def run1(name: str, attrs: dict[str, str] | None = None, *inputs: np.ndarray) -> np.ndarray:
    (out,) = run(name, attrs, *inputs)
    return out


def infer(name: str, attrs: dict[str, str], *shapes: tuple[int, ...] | None):
    op = registry.get(name)
    return op.infer_shape(op.parse(attrs), list(shapes))


def out_shape(name: str, attrs: dict[str, str], *shapes: tuple[int, ...]) -> tuple[int, ...]:
    (shape,) = infer(name, attrs, *shapes)[1]
    return tuple(shape)


X34 = np.arange(1, 13, dtype=np.float32).reshape(3, 4)  # [[1..4], [5..8], [9..12]]


# ---- names, aliases, arguments ------------------------------------------------------

ALIASES = [
    ("_add", "elemwise_add"), ("_plus", "elemwise_add"), ("_Plus", "elemwise_add"),
    ("_sub", "elemwise_sub"), ("_minus", "elemwise_sub"), ("_Minus", "elemwise_sub"),
    ("_mul", "elemwise_mul"), ("_Mul", "elemwise_mul"), ("_div", "elemwise_div"),
    ("_Div", "elemwise_div"), ("_Power", "_power"), ("_Maximum", "_maximum"),
    ("_Minimum", "_minimum"), ("broadcast_plus", "broadcast_add"),
    ("broadcast_minus", "broadcast_sub"), ("_PlusScalar", "_plus_scalar"),
    ("_MinusScalar", "_minus_scalar"), ("_RMinusScalar", "_rminus_scalar"),
    ("_MulScalar", "_mul_scalar"), ("_DivScalar", "_div_scalar"),
    ("_RDivScalar", "_rdiv_scalar"), ("_PowerScalar", "_power_scalar"),
    ("_RPowerScalar", "_rpower_scalar"), ("_EqualScalar", "_equal_scalar"),
    ("_GreaterScalar", "_greater_scalar"), ("reshape", "Reshape"), ("concat", "Concat"),
    ("split", "SliceChannel"), ("identity", "_copy"), ("stop_gradient", "BlockGrad"),
    ("cast", "Cast"), ("ElementWiseSum", "add_n"), ("crop", "slice"),
    ("broadcast_axes", "broadcast_axis"), ("sum_axis", "sum"), ("max_axis", "max"),
    ("min_axis", "min"),
]


@pytest.mark.parametrize("alias, name", ALIASES)
def test_aliases_share_the_definition(alias: str, name: str) -> None:
    assert registry.get(alias) is registry.get(name)
    assert registry.get(alias).name == name


REQUESTED = """
Reshape transpose expand_dims squeeze Concat SliceChannel slice slice_axis slice_like
elemwise_add elemwise_sub elemwise_mul elemwise_div broadcast_add broadcast_sub broadcast_mul
broadcast_div broadcast_mod broadcast_power broadcast_maximum broadcast_minimum broadcast_equal
broadcast_not_equal broadcast_greater broadcast_greater_equal broadcast_lesser
broadcast_lesser_equal broadcast_to broadcast_like broadcast_axis _plus_scalar _minus_scalar
_rminus_scalar _mul_scalar _div_scalar _rdiv_scalar _mod_scalar _power_scalar _rpower_scalar
_maximum_scalar _minimum_scalar _equal_scalar _not_equal_scalar _greater_scalar
_greater_equal_scalar _lesser_scalar _lesser_equal_scalar dot batch_dot take clip sum mean max
min prod argmax argmin topk exp log sqrt rsqrt square abs sign erf tanh sigmoid relu negative
reciprocal floor ceil round log1p expm1 cos sin where Cast zeros_like ones_like identity _copy
BlockGrad stop_gradient tile repeat stack add_n ElementWiseSum
""".split()


def test_every_requested_operator_is_registered() -> None:
    missing = [name for name in REQUESTED if registry.find(name) is None]
    assert missing == []


def test_argument_and_output_names() -> None:
    def names(name: str, attrs: dict[str, str]) -> tuple[list[str], list[str]]:
        op = registry.get(name)
        parsed = op.parse(attrs)
        return op.argument_names(parsed), op.output_names(parsed)

    assert names("elemwise_add", {}) == (["lhs", "rhs"], ["output"])
    assert names("broadcast_mul", {}) == (["lhs", "rhs"], ["output"])
    assert names("dot", {}) == (["lhs", "rhs"], ["output"])
    assert names("Reshape", {"shape": "(-1,)"}) == (["data"], ["output"])
    assert names("_mul_scalar", {"scalar": "2"}) == (["data"], ["output"])
    assert names("Concat", {"num_args": "3"})[0] == ["arg0", "arg1", "arg2"]
    assert names("stack", {"num_args": "2"})[0] == ["arg0", "arg1"]
    assert names("add_n", {"num_args": "2"})[0] == ["arg0", "arg1"]
    assert names("take", {}) == (["a", "indices"], ["output"])
    assert names("where", {})[0] == ["condition", "x", "y"]
    assert names("slice_like", {})[0] == ["data", "shape_like"]
    assert names("SliceChannel", {"num_outputs": "3"})[1] == ["output0", "output1", "output2"]
    assert names("SliceChannel", {"num_outputs": "1"})[1] == ["output0"]
    assert names("topk", {})[1] == ["output"]
    assert names("topk", {"ret_typ": "both"})[1] == ["output0", "output1"]
    assert names("topk", {"ret_typ": "value"})[1] == ["output0"]


def test_topk_value_keeps_indices_as_a_hidden_output() -> None:
    op = registry.get("topk")
    assert op.total_outputs(op.parse({"ret_typ": "value"})) == 2
    assert op.total_outputs(op.parse({"ret_typ": "both"})) == 2
    assert op.total_outputs(op.parse({"ret_typ": "indices"})) == 1
    assert op.total_outputs(op.parse({"ret_typ": "mask"})) == 1


def test_defaults() -> None:
    assert dict(registry.get("Concat").parse({"num_args": "2"})) == {"num_args": 2, "dim": 1}
    assert registry.get("SliceChannel").parse({"num_outputs": "2"}).axis == 1
    assert dict(registry.get("topk").parse({})) == {
        "axis": -1, "k": 1, "ret_typ": "indices", "is_ascend": False, "dtype": "float32"}
    assert dict(registry.get("_plus_scalar").parse({})) == {"scalar": 1.0, "is_int": True}
    assert dict(registry.get("take").parse({})) == {"axis": 0, "mode": "clip"}
    assert dict(registry.get("sum").parse({})) == {"axis": None, "keepdims": False,
                                                   "exclude": False}
    assert dict(registry.get("dot").parse({})) == {"transpose_a": False, "transpose_b": False,
                                                   "forward_stype": None}
    assert dict(registry.get("stack").parse({"num_args": "2"})) == {"axis": 0, "num_args": 2}


@pytest.mark.parametrize("name, attrs", [
    ("Concat", {}),                                  # num_args is required
    ("Concat", {"num_args": "0"}),
    ("SliceChannel", {"num_outputs": "two"}),
    ("Reshape", {"shape": "(2, None)"}),
    ("Reshape", {"shape": "(2, 3)", "bogus": "1"}),
    ("take", {"mode": "nearest"}),
    ("topk", {"ret_typ": "values"}),
    ("topk", {"dtype": "int8"}),
    ("Cast", {}),
    ("Cast", {"dtype": "complex64"}),
    ("clip", {"a_min": "0"}),
    ("slice_axis", {"axis": "0", "begin": "0"}),     # end is required (may be None)
    ("_plus_scalar", {"scalar": "abc"}),
    ("dot", {"forward_stype": "dense"}),
])
def test_bad_attributes_name_the_operator(name: str, attrs: dict[str, str]) -> None:
    with pytest.raises(OperatorError, match=name):
        registry.get(name).parse(attrs)


# ---- Reshape -------------------------------------------------------------------------

RESHAPE_CASES = [
    # MXNet's documented examples
    ((2, 3, 4), "(4,0,2)", (4, 3, 2)),
    ((2, 3, 4), "(2,0,0)", (2, 3, 4)),
    ((2, 3, 4), "(6,1,-1)", (6, 1, 4)),
    ((2, 3, 4), "(3,-1,8)", (3, 1, 8)),
    ((2, 3, 4), "(-1,)", (24,)),
    ((2, 3, 4), "(-2,)", (2, 3, 4)),
    ((2, 3, 4), "(2,-2)", (2, 3, 4)),
    ((2, 3, 4), "(-2,1,1)", (2, 3, 4, 1, 1)),
    ((2, 3, 4), "(-3,4)", (6, 4)),
    ((2, 3, 4, 5), "(-3,-3)", (6, 20)),
    ((2, 3, 4), "(0,-3)", (2, 12)),
    ((2, 3, 4), "(-3,-2)", (6, 4)),
    ((2, 3, 4), "(-4,1,2,-2)", (1, 2, 3, 4)),
    ((2, 3, 4), "(2,-4,-1,3,-2)", (2, 1, 3, 4)),
    ((10, 5, 4), "(-1,0)", (40, 5)),
    # the shapes of the shared transformer models
    ((2, 4, 32, 32), "(-1, 32, 32)", (8, 32, 32)),
    ((8, 32, 32), "(-1, 4, 32, 32)", (2, 4, 32, 32)),
    ((2, 10, 128), "(0, 0, 4, -1)", (2, 10, 4, 32)),
    ((2, 10, 4, 32), "(0, 0, -1)", (2, 10, 128)),
    ((2, 4, 10, 32), "(-3, 0, 0)", (8, 10, 32)),
    ((8, 10, 32), "(-4, -1, 4, 0, 0)", (2, 4, 10, 32)),
    ((8, 10, 32), "(-4, 2, -1, -2)", (2, 4, 10, 32)),
    ((6,), "6", (6,)),
]


@pytest.mark.parametrize("shape, codes, expected", RESHAPE_CASES)
def test_reshape_special_codes(shape, codes, expected) -> None:
    assert out_shape("Reshape", {"shape": codes}, shape) == expected
    x = rand(*shape)
    out = run1("Reshape", {"shape": codes}, x)
    np.testing.assert_array_equal(out.ravel(), x.ravel())


@pytest.mark.parametrize("shape, codes, expected", [
    ((10, 5, 4), "(-1,0)", (50, 4)),                 # MXNet's documented reverse example
    ((2, 3, 4), "(0,-1)", (3, 8)),
    ((2, 3, 4), "(-1,0)", (6, 4)),
    ((2, 3, 4, 5), "(-2,-3)", (2, 3, 20)),
])
def test_reshape_reverse(shape, codes, expected) -> None:
    assert out_shape("Reshape", {"shape": codes, "reverse": "True"}, shape) == expected


def test_reshape_legacy_target_shape() -> None:
    assert out_shape("Reshape", {"target_shape": "(0, 4)"}, (2, 3, 4)) == (6, 4)
    assert out_shape("Reshape", {"target_shape": "(4, 6)"}, (2, 3, 4)) == (4, 6)
    assert out_shape("Reshape", {"target_shape": "(9, 0)", "keep_highest": "True"},
                     (2, 3, 4)) == (2, 12)


@pytest.mark.parametrize("shape, attrs, message", [
    ((2, 3, 4), {"shape": "(-1, -1)"}, "more than one -1"),
    ((2, 3, 4), {"shape": "(5, -1)"}, "cannot reshape"),
    ((2, 3, 4), {"shape": "(7,)"}, "cannot reshape"),
    ((2, 3, 4), {"shape": "(0, 0, 0, 0)"}, "no input dimension left"),
    ((2, 3, 4), {"shape": "(-3, -3)"}, "no input dimension left"),
    ((2, 3, 4), {"shape": "(-4, -1, -1, -2)"}, "both be -1"),
    ((2, 3, 4), {"shape": "(-4, 3, -1, -2)"}, "does not divide"),
    ((2, 3, 4), {"shape": "(-4, 1)"}, "two values after it"),
    ((2, 3, 4), {"shape": "(-5, 24)"}, "invalid value -5"),
    ((8, 10, 32), {"shape": "(-4, -1, 4, 0, 0)", "reverse": "True"}, "two values after"),
    ((2, 3, 4), {}, "target shape is empty"),
])
def test_reshape_errors(shape, attrs, message) -> None:
    with pytest.raises(ShapeError, match=f"Reshape: .*{message}"):
        infer("Reshape", attrs, shape)


def test_reshape_needs_a_known_input() -> None:
    with pytest.raises(ShapeError, match="Reshape"):
        infer("Reshape", {"shape": "(-1,)"}, None)


# ---- transpose, expand_dims, squeeze ------------------------------------------------------

X222 = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 2)  # [[[1,2],[3,4]],[[5,6],[7,8]]]


def test_transpose_documented_examples() -> None:
    np.testing.assert_array_equal(run1("transpose", {}, X222),
                                  [[[1, 5], [3, 7]], [[2, 6], [4, 8]]])
    np.testing.assert_array_equal(run1("transpose", {"axes": "(1,0,2)"}, X222),
                                  [[[1, 2], [5, 6]], [[3, 4], [7, 8]]])


def test_transpose_model_axes() -> None:
    x = rand(2, 10, 4, 32)
    out = run1("transpose", {"axes": "(0, 2, 1, 3)"}, x)
    assert out.shape == (2, 4, 10, 32)
    np.testing.assert_array_equal(out, np.transpose(x, (0, 2, 1, 3)))


@pytest.mark.parametrize("axes", ["(0, 0, 1)", "(1, 0)", "(0, 1, 3)"])
def test_transpose_rejects_non_permutations(axes: str) -> None:
    with pytest.raises(ShapeError, match="transpose"):
        infer("transpose", {"axes": axes}, (2, 3, 4))


@pytest.mark.parametrize("axis, expected", [
    ("1", (2, 1, 3, 4)), ("0", (1, 2, 3, 4)), ("3", (2, 3, 4, 1)), ("-1", (2, 3, 4, 1)),
    ("-4", (1, 2, 3, 4)), ("-2", (2, 3, 1, 4)),
])
def test_expand_dims(axis: str, expected) -> None:
    assert out_shape("expand_dims", {"axis": axis}, (2, 3, 4)) == expected
    x = rand(2, 3, 4)
    np.testing.assert_array_equal(run1("expand_dims", {"axis": axis}, x).ravel(), x.ravel())


@pytest.mark.parametrize("axis", ["4", "-5"])
def test_expand_dims_axis_range(axis: str) -> None:
    with pytest.raises(ShapeError, match="expand_dims"):
        infer("expand_dims", {"axis": axis}, (2, 3, 4))


@pytest.mark.parametrize("shape, attrs, expected", [
    ((1, 3, 1, 4), {}, (3, 4)),
    ((1, 3, 1, 4), {"axis": "(2,)"}, (1, 3, 4)),
    ((1, 3, 1, 4), {"axis": "-4"}, (3, 1, 4)),
    ((1, 3, 1, 4), {"axis": "(0, -2)"}, (3, 4)),
    ((1, 1), {}, (1,)),                      # MXNet never squeezes to 0-d
    ((2, 3), {}, (2, 3)),
])
def test_squeeze(shape, attrs, expected) -> None:
    assert out_shape("squeeze", attrs, shape) == expected


@pytest.mark.parametrize("attrs", [{"axis": "(1,)"}, {"axis": "(0, -3)"}, {"axis": "(3,)"}])
def test_squeeze_errors(attrs) -> None:
    with pytest.raises(ShapeError, match="squeeze"):
        infer("squeeze", attrs, (1, 3, 1))


# ---- Concat, stack, SliceChannel ------------------------------------------------------------


def test_concat() -> None:
    a, b = rand(2, 64, 3, 3), rand(2, 32, 3, 3)
    out = run1("Concat", {"dim": "1", "num_args": "2"}, a, b)
    np.testing.assert_array_equal(out, np.concatenate([a, b], axis=1))
    c = rand(2, 64, 3, 1)
    out = run1("concat", {"dim": "-1", "num_args": "2"}, a, c)
    assert out.shape == (2, 64, 3, 4)
    np.testing.assert_array_equal(out[..., 3:], c)


@pytest.mark.parametrize("shapes, attrs", [
    (((2, 3), (3, 3)), {"dim": "1", "num_args": "2"}),
    (((2, 3), (2, 3, 1)), {"dim": "0", "num_args": "2"}),
    (((2, 3), (2, 3)), {"dim": "2", "num_args": "2"}),
    (((2, 3), None), {"dim": "1", "num_args": "2"}),
])
def test_concat_errors(shapes, attrs) -> None:
    with pytest.raises(ShapeError, match="Concat"):
        infer("Concat", attrs, *shapes)


def test_stack_documented_examples() -> None:
    x, y = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    np.testing.assert_array_equal(run1("stack", {"num_args": "2"}, x, y), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(run1("stack", {"num_args": "2", "axis": "1"}, x, y),
                                  [[1, 3], [2, 4]])
    np.testing.assert_array_equal(run1("stack", {"num_args": "2", "axis": "-1"}, x, y),
                                  [[1, 3], [2, 4]])


def test_stack_fills_unknown_inputs_and_checks_axis() -> None:
    assert infer("stack", {"num_args": "2"}, (2, 3), None) == ([(2, 3), (2, 3)], [(2, 2, 3)])
    with pytest.raises(ShapeError, match="stack"):
        infer("stack", {"num_args": "2", "axis": "3"}, (2, 3), (2, 3))
    with pytest.raises(ShapeError, match="stack"):
        infer("stack", {"num_args": "2"}, (2, 3), (3, 2))


def test_slice_channel_model_split() -> None:
    x = rand(2, 10, 384)
    outs = run("SliceChannel", {"axis": "-1", "num_outputs": "3"}, x)
    assert [out.shape for out in outs] == [(2, 10, 128)] * 3
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(out, x[..., 128 * k:128 * (k + 1)])


def test_slice_channel_default_axis_and_squeeze() -> None:
    x = rand(2, 3, 4)
    outs = run("split", {"num_outputs": "3", "squeeze_axis": "True"}, x)
    assert [out.shape for out in outs] == [(2, 4)] * 3
    np.testing.assert_array_equal(outs[1], x[:, 1, :])


@pytest.mark.parametrize("shape, attrs", [
    ((2, 10, 384), {"axis": "-1", "num_outputs": "5"}),
    ((2, 6, 4), {"num_outputs": "3", "squeeze_axis": "True"}),
    ((2, 6, 4), {"num_outputs": "2", "axis": "3"}),
])
def test_slice_channel_errors(shape, attrs) -> None:
    with pytest.raises(ShapeError, match="SliceChannel"):
        infer("SliceChannel", attrs, shape)


# ---- slice, slice_axis, slice_like -------------------------------------------------------------


def test_slice_documented_examples() -> None:
    np.testing.assert_array_equal(run1("slice", {"begin": "(0,1)", "end": "(2,4)"}, X34),
                                  [[2, 3, 4], [6, 7, 8]])
    out = run1("slice", {"begin": "(None, 0)", "end": "(None, 3)", "step": "(-1, 2)"}, X34)
    np.testing.assert_array_equal(out, [[9, 11], [5, 7], [1, 3]])


@pytest.mark.parametrize("attrs, expected", [
    ({"begin": "(-2,)", "end": "(None,)"}, [[5, 6, 7, 8], [9, 10, 11, 12]]),
    ({"begin": "(1, -1)", "end": "(3, None)"}, [[8], [12]]),
    ({"begin": "(2,)", "end": "(0,)", "step": "(-1,)"}, [[9, 10, 11, 12], [5, 6, 7, 8]]),
    ({"begin": "(None, 3)", "end": "(None, 0)", "step": "(2, -2)"}, [[4, 2], [12, 10]]),
    ({"begin": "(None, -1)", "end": "(None, None)", "step": "(None, -1)"},
     [[4, 3, 2, 1], [8, 7, 6, 5], [12, 11, 10, 9]]),
])
def test_slice_cases(attrs, expected) -> None:
    np.testing.assert_array_equal(run1("crop", attrs, X34), expected)


@pytest.mark.parametrize("attrs", [
    {"begin": "(1,)", "end": "(1,)"},            # empty slices are not supported
    {"begin": "(3,)", "end": "(None,)"},
    {"begin": "(-4,)", "end": "(None,)"},
    {"begin": "(0,)", "end": "(4,)"},
    {"begin": "(0,)", "end": "(-4,)"},
    {"begin": "(2,)", "end": "(1,)"},
    {"begin": "(0, 1)", "end": "(2,)"},
    {"begin": "(0, 0, 0)", "end": "(1, 1, 1)"},
    {"begin": "(0,)", "end": "(2,)", "step": "(1, 1)"},
])
def test_slice_errors(attrs) -> None:
    with pytest.raises(ShapeError, match="slice"):
        infer("slice", attrs, (3, 4))


def test_slice_step_zero() -> None:
    with pytest.raises(OperatorError, match="slice"):
        infer("slice", {"begin": "(0,)", "end": "(2,)", "step": "(0,)"}, (3, 4))


@pytest.mark.parametrize("attrs, expected", [
    ({"axis": "0", "begin": "1", "end": "3"}, [[5, 6, 7, 8], [9, 10, 11, 12]]),
    ({"axis": "1", "begin": "0", "end": "2"}, [[1, 2], [5, 6], [9, 10]]),
    ({"axis": "1", "begin": "-3", "end": "-1"}, [[2, 3], [6, 7], [10, 11]]),
    ({"axis": "-1", "begin": "2", "end": "None"}, [[3, 4], [7, 8], [11, 12]]),
])
def test_slice_axis_documented_examples(attrs, expected) -> None:
    np.testing.assert_array_equal(run1("slice_axis", attrs, X34), expected)


def test_slice_axis_model_case() -> None:
    x = rand(2, 10, 128)
    out = run1("slice_axis", {"axis": "1", "begin": "0", "end": "1"}, x)
    np.testing.assert_array_equal(out, x[:, :1, :])


@pytest.mark.parametrize("attrs", [
    {"axis": "1", "begin": "2", "end": "2"},
    {"axis": "1", "begin": "0", "end": "5"},
    {"axis": "1", "begin": "-5", "end": "2"},
    {"axis": "2", "begin": "0", "end": "1"},
])
def test_slice_axis_errors(attrs) -> None:
    with pytest.raises(ShapeError, match="slice_axis"):
        infer("slice_axis", attrs, (3, 4))


@pytest.mark.parametrize("attrs, expected", [
    ({}, [[1, 2, 3], [5, 6, 7]]),
    ({"axes": "(0, 1)"}, [[1, 2, 3], [5, 6, 7]]),
    ({"axes": "(0,)"}, [[1, 2, 3, 4], [5, 6, 7, 8]]),
    ({"axes": "(-1,)"}, [[1, 2, 3], [5, 6, 7], [9, 10, 11]]),
])
def test_slice_like_documented_examples(attrs, expected) -> None:
    like = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(run1("slice_like", attrs, X34, like), expected)


def test_slice_like_errors() -> None:
    with pytest.raises(ShapeError, match="slice_like"):
        infer("slice_like", {}, (3, 4), (2,))
    with pytest.raises(ShapeError, match="slice_like"):
        infer("slice_like", {}, (3, 4), (4, 4))


# ---- element-wise and broadcasting binary operators ---------------------------------------------

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "mod": np.mod,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "hypot": np.hypot,
    "equal": lambda a, b: (a == b).astype(a.dtype),
    "not_equal": lambda a, b: (a != b).astype(a.dtype),
    "greater": lambda a, b: (a > b).astype(a.dtype),
    "greater_equal": lambda a, b: (a >= b).astype(a.dtype),
    "lesser": lambda a, b: (a < b).astype(a.dtype),
    "lesser_equal": lambda a, b: (a <= b).astype(a.dtype),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(a.dtype),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(a.dtype),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(a.dtype),
}
ELEMWISE_NAMES = {"add": "elemwise_add", "sub": "elemwise_sub", "mul": "elemwise_mul",
                  "div": "elemwise_div"}


def operands(lhs_shape, rhs_shape) -> tuple[np.ndarray, np.ndarray]:
    """Positive operands with many equal pairs (for the comparisons) and some zeros."""
    a = RNG.integers(0, 4, size=lhs_shape).astype(np.float32) * 0.5 + 0.5
    b = RNG.integers(0, 4, size=rhs_shape).astype(np.float32) * 0.5 + 0.5
    a.flat[0] = 0.0
    return a, b


@pytest.mark.parametrize("kind", sorted(BINARY))
def test_elemwise_binary(kind: str) -> None:
    name = ELEMWISE_NAMES.get(kind, f"_{kind}")
    a, b = operands((3, 5), (3, 5))
    np.testing.assert_allclose(run1(name, {}, a, b), BINARY[kind](a, b), rtol=1e-6)


@pytest.mark.parametrize("kind", sorted(BINARY))
def test_broadcast_binary(kind: str) -> None:
    a, b = operands((2, 1, 4), (3, 1))
    out = run1(f"broadcast_{kind}", {}, a, b)
    assert out.shape == (2, 3, 4)
    np.testing.assert_allclose(out, BINARY[kind](a, b), rtol=1e-6)


def test_broadcast_model_case_and_aliases() -> None:
    a, b = rand(2, 10, 128), rand(2, 1, 128)
    np.testing.assert_allclose(run1("broadcast_plus", {}, a, b), a + b, rtol=1e-6)
    np.testing.assert_allclose(run1("broadcast_minus", {}, a, b), a - b, rtol=1e-6)
    np.testing.assert_allclose(run1("_Plus", {}, a, a), a + a, rtol=1e-6)


def test_mod_takes_the_divisor_sign_and_mod_zero_is_zero() -> None:
    a = np.array([-7, 7, -7, 7, 5.5, -5.5], np.float32)
    b = np.array([3, 3, -3, -3, 0, 2], np.float32)
    np.testing.assert_array_equal(run1("broadcast_mod", {}, a, b), [2, 1, -1, -2, 0, 0.5])
    np.testing.assert_array_equal(run1("_mod", {}, a.astype(np.int32), b.astype(np.int32)),
                                  [2, 1, -1, -2, 0, 1])


def test_integer_division_truncates_toward_zero() -> None:
    a = np.array([7, -7, 7, -7, 6], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    out = run1("elemwise_div", {}, a, b)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [3, -3, -3, 3, 2])


def test_integer_arithmetic_is_exact() -> None:
    a = np.array([2**40 + 1, -3], np.int64)
    b = np.array([2**40, 5], np.int64)
    np.testing.assert_array_equal(run1("broadcast_sub", {}, a, b), [1, -8])
    np.testing.assert_array_equal(run1("broadcast_mul", {}, a, b)[1:], [-15])


def test_comparisons_keep_the_input_dtype() -> None:
    a = np.array([1, 2, 3], np.float16)
    out = run1("broadcast_greater", {}, a, np.array([2], np.float16))
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, [0, 0, 1])


def test_elemwise_shape_inference_fills_unknown_operands() -> None:
    assert infer("elemwise_add", {}, (2, 3), None) == ([(2, 3), (2, 3)], [(2, 3)])
    assert infer("elemwise_mul", {}, None, (4,)) == ([(4,), (4,)], [(4,)])
    with pytest.raises(ShapeError, match=r"elemwise_add.*\(2, 3\).*\(3, 2\)"):
        infer("elemwise_add", {}, (2, 3), (3, 2))
    with pytest.raises(ShapeError, match="elemwise_sub"):
        infer("elemwise_sub", {}, None, None)


def test_broadcast_shape_errors() -> None:
    assert out_shape("broadcast_add", {}, (5, 1, 3), (4, 1)) == (5, 4, 3)
    assert out_shape("broadcast_add", {}, (1, 3), (0, 1)) == (0, 3)
    with pytest.raises(ShapeError, match=r"broadcast_add.*\(2, 3\).*\(4,\)"):
        infer("broadcast_add", {}, (2, 3), (4,))
    with pytest.raises(ShapeError, match="broadcast_mul"):
        infer("broadcast_mul", {}, (2, 3), None)


def test_binary_dtype_inference() -> None:
    op = registry.get("elemwise_add")
    attrs = op.parse({})
    assert op.infer_type(attrs, [np.dtype(np.float16), None]) == (
        [np.dtype(np.float16)] * 2, [np.dtype(np.float16)])
    with pytest.raises(ShapeError, match="elemwise_add"):
        op.infer_type(attrs, [np.dtype(np.float16), np.dtype(np.float32)])
    with pytest.raises(ShapeError, match="broadcast_add"):
        registry.get("broadcast_add").infer_type(attrs, [F32, np.dtype(np.int32)])


# ---- scalar operators

SCALAR = [
    ("_plus_scalar", lambda x, s: x + s),
    ("_minus_scalar", lambda x, s: x - s),
    ("_rminus_scalar", lambda x, s: s - x),
    ("_mul_scalar", lambda x, s: x * s),
    ("_div_scalar", lambda x, s: x / s),
    ("_rdiv_scalar", lambda x, s: s / x),
    ("_mod_scalar", np.mod),
    ("_rmod_scalar", lambda x, s: np.mod(s, x)),
    ("_power_scalar", np.power),
    ("_rpower_scalar", lambda x, s: np.power(s, x)),
    ("_maximum_scalar", np.maximum),
    ("_minimum_scalar", np.minimum),
    ("_hypot_scalar", np.hypot),
    ("_equal_scalar", lambda x, s: x == s),
    ("_not_equal_scalar", lambda x, s: x != s),
    ("_greater_scalar", lambda x, s: x > s),
    ("_greater_equal_scalar", lambda x, s: x >= s),
    ("_lesser_scalar", lambda x, s: x < s),
    ("_lesser_equal_scalar", lambda x, s: x <= s),
]


@pytest.mark.parametrize("name, expr", SCALAR)
def test_scalar_operators(name, expr) -> None:
    x = RNG.integers(1, 8, size=(4, 5)).astype(np.float32) * 0.5  # hits 2.5 exactly
    out = run1(name, {"scalar": "2.5"}, x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.asarray(expr(x, np.float32(2.5)), np.float32), rtol=1e-6)


def test_scalar_model_case_and_legacy_alias() -> None:
    x = rand(2, 10, 128)
    out = run1("_MulScalar", {"scalar": "0.17677669529663687"}, x)
    np.testing.assert_allclose(out, x * np.float32(0.17677669529663687), rtol=1e-6)
    np.testing.assert_allclose(run1("_plus_scalar", {}, x), x + 1, rtol=1e-6)


def test_scalar_is_converted_to_the_integer_dtype() -> None:
    x = np.array([7, -7, 3], np.int32)
    out = run1("_div_scalar", {"scalar": "2.5", "is_int": "False"}, x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [3, -3, 1])        # divided by int32(2.5) == 2
    np.testing.assert_array_equal(run1("_plus_scalar", {"scalar": "1.9"}, x), [8, -6, 4])
    np.testing.assert_array_equal(run1("_rminus_scalar", {"scalar": "10"}, x), [3, 17, 7])


def test_scalar_shape_requires_the_input() -> None:
    with pytest.raises(ShapeError, match="_mul_scalar"):
        infer("_mul_scalar", {"scalar": "2"}, None)


# ---- unary math

UNARY = [
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("rsqrt", lambda x: 1 / np.sqrt(x)),
    ("square", np.square), ("abs", np.abs), ("sign", np.sign), ("tanh", np.tanh),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("relu", lambda x: np.maximum(x, 0)),
    ("negative", np.negative), ("reciprocal", lambda x: 1 / x), ("floor", np.floor),
    ("ceil", np.ceil), ("log1p", np.log1p), ("expm1", np.expm1), ("cos", np.cos),
    ("sin", np.sin), ("tan", np.tan), ("arctan", np.arctan), ("sinh", np.sinh),
    ("cosh", np.cosh), ("log2", np.log2), ("log10", np.log10), ("cbrt", np.cbrt),
    ("trunc", np.trunc), ("fix", np.fix), ("arcsinh", np.arcsinh),
]


@pytest.mark.parametrize("name, fn", UNARY)
def test_unary_math(name, fn) -> None:
    sign = np.where(RNG.random((3, 7)) < 0.5, -1, 1).astype(np.float32)
    x = rand(3, 7, low=0.1, high=3.0)
    if name not in ("log", "sqrt", "rsqrt", "log2", "log10", "log1p"):
        x = x * sign
    out = run1(name, {}, x)
    np.testing.assert_allclose(out, fn(x), rtol=2e-6, atol=1e-7)


def test_erf_against_tabulated_values() -> None:
    x = np.array([0.0, 0.5, 1.0, -1.0, 2.0], np.float32)
    expected = [0.0, 0.5204998778, 0.8427007929, -0.8427007929, 0.9953222650]
    np.testing.assert_allclose(run1("erf", {}, x), expected, rtol=1e-6)


def test_rounding_functions() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6], np.float32)
    np.testing.assert_array_equal(run1("round", {}, x), [-3, -2, -1, 1, 2, 3, 2, -3])
    np.testing.assert_array_equal(run1("rint", {}, x), [-2, -2, 0, 0, 2, 2, 2, -3])
    np.testing.assert_array_equal(run1("fix", {}, x), [-2, -1, 0, 0, 1, 2, 2, -2])


def test_unary_math_on_integers_keeps_the_dtype() -> None:
    x = np.array([-3, 4, 8], np.int32)
    np.testing.assert_array_equal(run1("abs", {}, x), [3, 4, 8])
    np.testing.assert_array_equal(run1("square", {}, x), [9, 16, 64])
    out = run1("sqrt", {}, np.array([4, 8, 15], np.int32))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [2, 2, 3])


def test_unary_math_in_float16() -> None:
    x = np.array([0.5, 1.0, 2.0], np.float16)
    out = run1("exp", {}, x)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, np.exp([0.5, 1.0, 2.0]), rtol=1e-3)


# ---- copies, casts, clip, add_n ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["identity", "_copy", "BlockGrad", "stop_gradient"])
def test_copies(name: str) -> None:
    x = rand(2, 3)
    out = run1(name, {}, x)
    np.testing.assert_array_equal(out, x)


def test_zeros_like_and_ones_like() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(run1("zeros_like", {}, x), np.zeros((2, 3)))
    assert run1("ones_like", {}, x).dtype == np.int32
    np.testing.assert_array_equal(run1("ones_like", {}, x), np.ones((2, 3)))


def test_cast() -> None:
    x = np.array([1.7, -1.7, 300.25], np.float32)
    out = run1("Cast", {"dtype": "int32"}, x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [1, -1, 300])
    assert run1("cast", {"dtype": "float16"}, x).dtype == np.float16
    op = registry.get("Cast")
    assert op.infer_type(op.parse({"dtype": "int64"}), [None]) == (
        [F32], [np.dtype(np.int64)])


def test_clip() -> None:
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(run1("clip", {"a_min": "1", "a_max": "8"}, x),
                                  [1, 1, 2, 3, 4, 5, 6, 7, 8, 8])
    y = rand(2, 3, low=-10, high=10)
    np.testing.assert_array_equal(run1("clip", {"a_min": "0", "a_max": "6"}, y),
                                  np.clip(y, 0, 6))
    ints = np.array([0, 1, 2, 5], np.int32)
    np.testing.assert_array_equal(run1("clip", {"a_min": "1.5", "a_max": "3.9"}, ints),
                                  [1, 1, 2, 3])


def test_clip_with_crossed_bounds_tests_the_upper_bound_first() -> None:
    # MXNet: x > a_max ? a_max : (x < a_min ? a_min : x)
    x = np.array([0, 5, 10], np.float32)
    np.testing.assert_array_equal(run1("clip", {"a_min": "6", "a_max": "4"}, x), [6, 4, 4])


def test_add_n() -> None:
    a, b, c = rand(2, 3), rand(2, 3), rand(2, 3)
    np.testing.assert_allclose(run1("add_n", {"num_args": "3"}, a, b, c), a + b + c, rtol=1e-6)
    np.testing.assert_allclose(run1("ElementWiseSum", {"num_args": "2"}, a, b), a + b,
                               rtol=1e-6)
    assert infer("add_n", {"num_args": "2"}, None, (4,)) == ([(4,), (4,)], [(4,)])
    with pytest.raises(ShapeError, match="add_n"):
        infer("add_n", {"num_args": "2"}, (3,), (4,))


# ---- broadcast_to, broadcast_axis, broadcast_like, tile, repeat


def test_broadcast_to_and_axis() -> None:
    x = rand(2, 1, 3)
    expected = np.broadcast_to(x, (2, 4, 3))
    np.testing.assert_array_equal(run1("broadcast_to", {"shape": "(2, 4, 3)"}, x), expected)
    np.testing.assert_array_equal(run1("broadcast_to", {"shape": "(0, 4, 0)"}, x), expected)
    np.testing.assert_array_equal(
        run1("broadcast_axis", {"axis": "(1,)", "size": "(4,)"}, x), expected)
    np.testing.assert_array_equal(
        run1("broadcast_axes", {"axis": "(-2,)", "size": "(4,)"}, x), expected)


@pytest.mark.parametrize("name, attrs", [
    ("broadcast_to", {"shape": "(2, 4, 4)"}),
    ("broadcast_to", {"shape": "(4, 3)"}),
    ("broadcast_axis", {"axis": "(0,)", "size": "(3,)"}),
    ("broadcast_axis", {"axis": "(1,)", "size": "(3, 4)"}),
])
def test_broadcast_to_errors(name, attrs) -> None:
    with pytest.raises(ShapeError, match=name):
        infer(name, attrs, (2, 1, 3))


def test_broadcast_like() -> None:
    x = rand(2, 1, 3)
    out = run1("broadcast_like", {}, x, rand(2, 4, 3))
    np.testing.assert_array_equal(out, np.broadcast_to(x, (2, 4, 3)))
    out = run1("broadcast_like", {"lhs_axes": "(1,)", "rhs_axes": "(0,)"}, x, rand(5, 7))
    np.testing.assert_array_equal(out, np.broadcast_to(x, (2, 5, 3)))
    with pytest.raises(ShapeError, match="broadcast_like"):
        infer("broadcast_like", {}, (2, 2, 3), (2, 4, 3))


X22 = np.array([[1, 2], [3, 4]], np.float32)


def test_tile_documented_examples() -> None:
    np.testing.assert_array_equal(run1("tile", {"reps": "(2, 3)"}, X22),
                                  [[1, 2, 1, 2, 1, 2], [3, 4, 3, 4, 3, 4],
                                   [1, 2, 1, 2, 1, 2], [3, 4, 3, 4, 3, 4]])
    np.testing.assert_array_equal(run1("tile", {"reps": "(2,)"}, X22),
                                  [[1, 2, 1, 2], [3, 4, 3, 4]])
    out = run1("tile", {"reps": "(2, 2, 3)"}, X22)
    assert out.shape == (2, 4, 6)
    np.testing.assert_array_equal(out[1, 2:, 4:], X22)
    with pytest.raises(OperatorError, match="tile"):
        infer("tile", {"reps": "(2, 0)"}, (2, 2))


def test_repeat_documented_examples() -> None:
    np.testing.assert_array_equal(run1("repeat", {"repeats": "2"}, X22),
                                  [1, 1, 2, 2, 3, 3, 4, 4])
    np.testing.assert_array_equal(run1("repeat", {"repeats": "2", "axis": "1"}, X22),
                                  [[1, 1, 2, 2], [3, 3, 4, 4]])
    np.testing.assert_array_equal(run1("repeat", {"repeats": "2", "axis": "0"}, X22),
                                  [[1, 2], [1, 2], [3, 4], [3, 4]])
    np.testing.assert_array_equal(run1("repeat", {"repeats": "2", "axis": "-1"}, X22),
                                  [[1, 1, 2, 2], [3, 3, 4, 4]])
    assert out_shape("repeat", {"repeats": "0", "axis": "1"}, (2, 2)) == (0,)
    with pytest.raises(OperatorError, match="repeat"):
        infer("repeat", {"repeats": "-1"}, (2, 2))


# ---- dot, batch_dot


@pytest.mark.parametrize("lhs, rhs, attrs, expected", [
    ((3, 4), (4, 5), {}, lambda a, b: a @ b),
    ((4, 3), (4, 5), {"transpose_a": "True"}, lambda a, b: a.T @ b),
    ((3, 4), (5, 4), {"transpose_b": "True"}, lambda a, b: a @ b.T),
    ((4, 3), (5, 4), {"transpose_a": "True", "transpose_b": "True"}, lambda a, b: a.T @ b.T),
    ((2, 3, 4), (4, 5), {}, lambda a, b: np.tensordot(a, b, axes=1)),
    ((2, 3), (3, 4, 5), {}, lambda a, b: np.tensordot(a, b, axes=1)),
    ((4, 2, 3), (4, 5), {"transpose_a": "True"},
     lambda a, b: np.tensordot(a, b, axes=([0], [0]))),
    ((3, 4), (5, 6, 4), {"transpose_b": "True"},
     lambda a, b: np.tensordot(a, b, axes=([1], [2]))),
    ((4,), (4, 5), {}, lambda a, b: a @ b),
    ((4,), (4,), {}, lambda a, b: np.array([a @ b])),
])
def test_dot(lhs, rhs, attrs, expected) -> None:
    a, b = rand(*lhs), rand(*rhs)
    np.testing.assert_allclose(run1("dot", attrs, a, b), expected(a, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lhs, rhs, attrs", [
    ((3, 4), (5, 6), {}),
    ((4,), (4,), {"transpose_a": "True"}),
    ((3, 4), (3, 4), {"transpose_b": "False"}),
    ((3, 4), None, {}),
])
def test_dot_errors(lhs, rhs, attrs) -> None:
    with pytest.raises(ShapeError, match="dot"):
        infer("dot", attrs, lhs, rhs)


@pytest.mark.parametrize("lhs, rhs, attrs, expected", [
    ((2, 3, 4), (2, 4, 5), {}, np.matmul),
    ((2, 3, 4), (2, 5, 4), {"transpose_b": "True"},
     lambda a, b: np.matmul(a, np.swapaxes(b, 1, 2))),
    ((2, 4, 3), (2, 4, 5), {"transpose_a": "True"},
     lambda a, b: np.matmul(np.swapaxes(a, 1, 2), b)),
    ((2, 2, 3, 4), (2, 2, 4, 5), {}, np.matmul),
])
def test_batch_dot(lhs, rhs, attrs, expected) -> None:
    a, b = rand(*lhs), rand(*rhs)
    np.testing.assert_allclose(run1("batch_dot", attrs, a, b), expected(a, b), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("lhs, rhs", [
    ((2, 3, 4), (3, 4, 5)), ((3, 4), (4, 5)), ((2, 3, 4), (2, 5, 4)), ((2, 3, 4), (2, 4)),
])
def test_batch_dot_errors(lhs, rhs) -> None:
    with pytest.raises(ShapeError, match="batch_dot"):
        infer("batch_dot", {}, lhs, rhs)


# ---- take, where


def test_take_documented_examples() -> None:
    x = np.array([4, 5, 6], np.float32)
    np.testing.assert_array_equal(run1("take", {}, x, np.array([1], np.float32)), [5])
    x2 = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    out = run1("take", {}, x2, np.array([[0, 1], [1, 2]], np.float32))
    np.testing.assert_array_equal(out, [[[1, 2], [3, 4]], [[3, 4], [5, 6]]])


def test_take_modes_with_float_indices() -> None:
    x = np.array([4, 5, 6], np.float32)
    indices = np.array([-1, 5, 2.7, -0.5], np.float32)
    np.testing.assert_array_equal(run1("take", {"mode": "clip"}, x, indices), [4, 6, 6, 4])
    wrap = np.array([-1, 4, 2.7, -4], np.float32)
    np.testing.assert_array_equal(run1("take", {"mode": "wrap"}, x, wrap), [6, 5, 6, 6])
    np.testing.assert_array_equal(run1("take", {"mode": "raise"}, x, np.array([2, 0.9])), [6, 4])
    with pytest.raises(OperatorError, match="take"):
        run1("take", {"mode": "raise"}, x, np.array([3], np.float32))


def test_take_along_other_axes() -> None:
    x = rand(3, 4, 2)
    idx = np.array([[3, 0], [1, 1]], np.int32)
    out = run1("take", {"axis": "1"}, x, idx)
    assert out.shape == (3, 2, 2, 2)
    np.testing.assert_array_equal(out, x[:, [[3, 0], [1, 1]], :])
    np.testing.assert_array_equal(run1("take", {"axis": "-1"}, x, np.array([1.0])), x[..., [1]])
    with pytest.raises(ShapeError, match="take"):
        infer("take", {"axis": "3"}, (3, 4, 2), (2,))


def test_where() -> None:
    condition = np.array([[0, 1], [-1, 0]], np.float32)
    x, y = X22, np.array([[5, 6], [7, 8]], np.float32)
    np.testing.assert_array_equal(run1("where", {}, condition, x, y), [[5, 2], [3, 8]])
    np.testing.assert_array_equal(run1("where", {}, np.array([1, 0], np.float32), x, y),
                                  [[1, 2], [7, 8]])
    with pytest.raises(ShapeError, match="where"):
        infer("where", {}, (3,), (2, 2), (2, 2))
    with pytest.raises(ShapeError, match="where"):
        infer("where", {}, (2, 2), (2, 2), (2, 3))
    assert infer("where", {}, (2,), (2, 3), None)[0] == [(2,), (2, 3), (2, 3)]


# ---- reductions

DATA = np.array([[[1, 2], [2, 3], [1, 3]],
                 [[1, 4], [4, 3], [5, 2]],
                 [[7, 1], [7, 2], [7, 3]]], np.float32)


def test_sum_documented_examples() -> None:
    np.testing.assert_array_equal(run1("sum", {"axis": "1"}, DATA),
                                  [[4, 8], [10, 9], [21, 6]])
    np.testing.assert_array_equal(run1("sum", {"axis": "(1, 2)"}, DATA), [12, 19, 27])
    np.testing.assert_array_equal(run1("sum_axis", {}, DATA), [58])


@pytest.mark.parametrize("attrs, axes, keepdims, shape", [
    ({}, None, False, (1,)),
    ({"keepdims": "True"}, None, True, (1, 1, 1)),
    ({"axis": "()"}, None, False, (1,)),
    ({"axis": "-1"}, (2,), False, (2, 3)),
    ({"axis": "(0, 2)", "keepdims": "True"}, (0, 2), True, (1, 3, 1)),
    ({"axis": "1", "exclude": "True"}, (0, 2), False, (3,)),
    ({"axis": "1", "exclude": "True", "keepdims": "True"}, (0, 2), True, (1, 3, 1)),
    ({"axis": "(0, 1, 2)"}, None, False, (1,)),
])
@pytest.mark.parametrize("name, fn", [
    ("sum", np.sum), ("mean", np.mean), ("prod", np.prod), ("max", np.max), ("min", np.min),
    ("nansum", np.nansum), ("nanprod", np.nanprod),
])
def test_reductions(name, fn, attrs, axes, keepdims, shape) -> None:
    x = rand(2, 3, 4, low=0.5, high=1.5)
    out = run1(name, attrs, x)
    assert out.shape == shape
    expected = np.asarray(fn(x.astype(np.float64), axis=axes, keepdims=keepdims))
    np.testing.assert_allclose(out, expected.reshape(shape), rtol=1e-6)


def test_nan_reductions_skip_nan() -> None:
    x = np.array([[1, np.nan, 3]], np.float32)
    np.testing.assert_array_equal(run1("nansum", {"axis": "1"}, x), [4])
    np.testing.assert_array_equal(run1("nanprod", {"axis": "1"}, x), [3])


def test_integer_mean_truncates() -> None:
    x = np.array([[-3, -4], [3, 4]], np.int32)
    out = run1("mean", {"axis": "1"}, x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [-3, 3])


@pytest.mark.parametrize("name, attrs, shape", [
    ("sum", {"axis": "(1, 1)"}, (2, 3)),
    ("sum", {"axis": "(-1, 1)"}, (2, 3)),
    ("mean", {"axis": "2"}, (2, 3)),
    ("prod", {"axis": "-3"}, (2, 3)),
    ("max", {}, (0, 3)),
])
def test_reduction_errors(name, attrs, shape) -> None:
    with pytest.raises(ShapeError, match=name):
        infer(name, attrs, shape)


X_ARG = np.array([[0, 1, 2], [3, 4, 5]], np.float32)


def test_argmax_argmin_documented_examples() -> None:
    out = run1("argmax", {"axis": "0"}, X_ARG)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [1, 1, 1])
    np.testing.assert_array_equal(run1("argmax", {"axis": "1"}, X_ARG), [2, 2])
    np.testing.assert_array_equal(run1("argmax", {"axis": "1", "keepdims": "True"}, X_ARG),
                                  [[2], [2]])
    np.testing.assert_array_equal(run1("argmin", {"axis": "0"}, X_ARG), [0, 0, 0])
    np.testing.assert_array_equal(run1("argmin", {"axis": "1"}, X_ARG), [0, 0])


def test_argmax_flattened_ties_and_errors() -> None:
    np.testing.assert_array_equal(run1("argmax", {}, X_ARG), [5])
    assert out_shape("argmax", {"keepdims": "True"}, (2, 3)) == (1, 1)
    np.testing.assert_array_equal(run1("argmax", {"axis": "0"},
                                       np.array([1, 3, 3], np.float32)), [1])
    assert run1("argmin", {"axis": "-1"}, X_ARG.astype(np.float16)).dtype == np.float16
    with pytest.raises(ShapeError, match="argmax"):
        infer("argmax", {"axis": "2"}, (2, 3))


X_TOPK = np.array([[0.3, 0.2, 0.4], [0.1, 0.3, 0.2]], np.float32)


def test_topk_documented_examples() -> None:
    np.testing.assert_array_equal(run1("topk", {}, X_TOPK), [[2], [1]])
    np.testing.assert_array_equal(run1("topk", {"ret_typ": "value", "k": "2"}, X_TOPK),
                                  np.array([[0.4, 0.3], [0.3, 0.2]], np.float32))
    np.testing.assert_array_equal(
        run1("topk", {"ret_typ": "value", "k": "2", "is_ascend": "1"}, X_TOPK),
        np.array([[0.2, 0.3], [0.1, 0.2]], np.float32))
    np.testing.assert_array_equal(
        run1("topk", {"axis": "0", "ret_typ": "value", "k": "2"}, X_TOPK),
        np.array([[0.3, 0.3, 0.4], [0.1, 0.2, 0.2]], np.float32))
    values, indices = run("topk", {"ret_typ": "both", "k": "2"}, X_TOPK)
    np.testing.assert_array_equal(values, np.array([[0.4, 0.3], [0.3, 0.2]], np.float32))
    np.testing.assert_array_equal(indices, [[2, 0], [1, 2]])
    assert indices.dtype == np.float32


def test_topk_mask_flattened_full_sort_and_dtype() -> None:
    np.testing.assert_array_equal(run1("topk", {"ret_typ": "mask", "k": "2"}, X_TOPK),
                                  [[1, 0, 1], [0, 1, 1]])
    mask = run1("topk", {"ret_typ": "mask", "k": "2", "axis": "None"}, X_TOPK)
    np.testing.assert_array_equal(mask, [[1, 0, 1], [0, 0, 0]])
    # flattened: 0.4 at 2, then the tied 0.3s at 0 and 4 (the lower index first)
    np.testing.assert_array_equal(run1("topk", {"axis": "None", "k": "3"}, X_TOPK), [2, 0, 4])
    out = run1("topk", {"k": "0", "dtype": "int32"}, X_TOPK)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [[2, 0, 1], [1, 2, 0]])
    ascending = run1("topk", {"k": "-1", "is_ascend": "True", "dtype": "int64"}, X_TOPK)
    np.testing.assert_array_equal(ascending, [[1, 0, 2], [0, 2, 1]])


def test_topk_errors() -> None:
    with pytest.raises(ShapeError, match="topk"):
        infer("topk", {"k": "4"}, (2, 3))
    with pytest.raises(ShapeError, match="topk"):
        infer("topk", {"axis": "2"}, (2, 3))
    with pytest.raises(ShapeError, match="topk"):
        infer("topk", {"dtype": "uint8"}, (2, 300))


def test_topk_dtype_inference() -> None:
    op = registry.get("topk")
    f16 = np.dtype(np.float16)
    both = op.parse({"ret_typ": "both", "dtype": "int32"})
    assert op.infer_type(both, [f16]) == ([f16], [f16, np.dtype(np.int32)])
    assert op.infer_type(op.parse({"ret_typ": "mask"}), [f16]) == ([f16], [f16])
    assert op.infer_type(op.parse({}), [f16]) == ([f16], [F32])


def test_reductions_are_exact_enough_for_large_sums() -> None:
    x = np.full(1_000_000, 0.1, np.float32)
    assert math.isclose(float(run1("sum", {}, x)[0]), 100000.0014901161, rel_tol=1e-7)
