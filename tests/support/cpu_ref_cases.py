"""Operator cases for cpu_ref: (operator, attributes, input shapes, input
dtypes).

The float32 cases come first, written out; float16 variants of them (one
per operator at least) and integer variants of the operators that take
integers follow, generated from them. Every operator cpu_ref lists has a
float32 and a float16 case (tests/plugins/cpu_ref/test_cpu_ref_ops.py checks)."""

from __future__ import annotations

from typing import Any, NamedTuple


class Case(NamedTuple):
    op: str
    attrs: dict[str, Any]
    shapes: list[tuple[int, ...]]
    # One dtype for every input, or one per input.
    dtypes: str | tuple[str, ...] = "float32"

    def input_dtypes(self) -> list[str]:
        if isinstance(self.dtypes, str):
            return [self.dtypes] * len(self.shapes)
        return list(self.dtypes)


_FLOAT32: list[tuple[Any, ...]] = [
    ("Convolution", {"kernel": (3, 3), "num_filter": 4}, [(2, 3, 7, 6), (4, 3, 3, 3), (4,)]),
    ("Convolution", {"kernel": (3, 2), "num_filter": 5, "stride": (2, 1), "pad": (1, 2),
                     "dilate": (2, 1)}, [(1, 3, 9, 8), (5, 3, 3, 2), (5,)]),
    ("Convolution", {"kernel": (3, 3), "num_filter": 6, "num_group": 2, "pad": (1, 1)},
     [(1, 4, 5, 5), (6, 2, 3, 3), (6,)]),
    ("Convolution", {"kernel": (3, 3), "num_filter": 4, "num_group": 4, "pad": (1, 1),
                     "stride": (2, 2)}, [(2, 4, 8, 8), (4, 1, 3, 3), (4,)]),
    ("Convolution", {"kernel": (1, 1), "num_filter": 3, "no_bias": True},
     [(1, 5, 4, 4), (3, 5, 1, 1)]),
    # Stride 2 on both axes (split into phase planes by the stride-2 fast
    # path): odd and even padding and widths, deep (the wide grid) and shallow.
    ("Convolution", {"kernel": (3, 3), "num_filter": 5, "stride": (2, 2), "pad": (1, 1)},
     [(2, 9, 9, 7), (5, 9, 3, 3), (5,)]),
    ("Convolution", {"kernel": (3, 3), "num_filter": 5, "stride": (2, 2), "pad": (2, 2)},
     [(1, 9, 8, 9), (5, 9, 3, 3), (5,)]),
    ("Convolution", {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2)},
     [(1, 3, 9, 10), (4, 3, 3, 3), (4,)]),
    ("Convolution", {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "pad": (1, 1)},
     [(1, 3, 6, 11), (4, 3, 3, 3), (4,)]),
    ("Convolution", {"kernel": (3,), "num_filter": 2, "pad": (1,), "stride": (2,)},
     [(2, 3, 10), (2, 3, 3), (2,)]),
    ("Convolution", {"kernel": (2, 2, 2), "num_filter": 2, "pad": (1, 0, 1)},
     [(1, 2, 4, 5, 3), (2, 2, 2, 2, 2), (2,)]),
    ("FullyConnected", {"num_hidden": 7}, [(3, 2, 2, 3), (7, 12), (7,)]),
    ("FullyConnected", {"num_hidden": 5, "flatten": False}, [(2, 3, 4), (5, 4), (5,)]),
    ("FullyConnected", {"num_hidden": 4, "no_bias": True}, [(1, 9), (4, 9)]),
    ("Activation", {"act_type": "relu"}, [(2, 3, 4)]),
    ("Activation", {"act_type": "sigmoid"}, [(2, 3, 4)]),
    ("Activation", {"act_type": "tanh"}, [(5, 7)]),
    ("Activation", {"act_type": "softrelu"}, [(5, 7)]),
    ("Activation", {"act_type": "softsign"}, [(5, 7)]),
    ("Pooling", {"kernel": (2, 2), "stride": (2, 2)}, [(2, 3, 6, 7)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pool_type": "avg",
                 "pooling_convention": "full"}, [(1, 2, 8, 8)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg",
                 "count_include_pad": False}, [(1, 2, 7, 7)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"},
     [(1, 2, 7, 7)]),
    ("Pooling", {"kernel": (2, 3), "stride": (1, 2), "pool_type": "sum"}, [(1, 3, 5, 7)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full",
                 "pad": (1, 1)}, [(1, 2, 6, 6)]),
    # the last row and column of windows hold padding only: 0, as in MXNet
    ("Pooling", {"kernel": (2, 2), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg",
                 "pooling_convention": "full", "count_include_pad": False}, [(1, 2, 3, 3)]),
    ("Pooling", {"global_pool": True, "kernel": (1, 1)}, [(2, 3, 5, 4)]),
    ("Pooling", {"global_pool": True, "pool_type": "avg", "kernel": (1, 1)}, [(2, 3, 5, 4)]),
    ("Pooling", {"kernel": (2,), "stride": (2,)}, [(2, 3, 9)]),
    ("Pooling", {"kernel": (2, 2, 2), "pool_type": "avg"}, [(1, 2, 3, 4, 5)]),
    ("BatchNorm", {"fix_gamma": False, "eps": 1e-5}, [(2, 3, 4, 5), (3,), (3,), (3,), (3,)]),
    ("BatchNorm", {}, [(2, 3, 4, 5), (3,), (3,), (3,), (3,)]),
    ("BatchNorm", {"axis": -1, "fix_gamma": False}, [(6, 4), (4,), (4,), (4,), (4,)]),
    ("elemwise_add", {}, [(2, 3, 4), (2, 3, 4)]),
    ("Flatten", {}, [(2, 3, 4, 5)]),
    ("Flatten", {}, [(4, 6)]),
    ("softmax", {}, [(3, 10)]),
    ("softmax", {"axis": 1}, [(2, 5, 3)]),
    ("softmax", {"axis": 0, "temperature": 2.5}, [(4, 3)]),
    ("log_softmax", {}, [(3, 10)]),
    ("log_softmax", {"axis": 0}, [(4, 3)]),
    ("log_softmax", {"axis": 1, "temperature": 0.5}, [(2, 5, 3)]),
    # LayerNorm: default axis -1, another axis, and the mean/std outputs
    ("LayerNorm", {}, [(2, 5, 6), (6,), (6,)]),
    ("LayerNorm", {"axis": 1, "eps": 1e-3}, [(2, 5, 3), (5,), (5,)]),
    ("LayerNorm", {"axis": 0, "output_mean_var": True}, [(4, 3), (4,), (4,)]),
    ("LeakyReLU", {}, [(2, 3, 4)]),
    ("LeakyReLU", {"act_type": "leaky", "slope": 0.1}, [(5, 7)]),
    ("LeakyReLU", {"act_type": "elu", "slope": 0.5}, [(5, 7)]),
    ("LeakyReLU", {"act_type": "selu"}, [(5, 7)]),
    ("LeakyReLU", {"act_type": "gelu"}, [(2, 3, 8)]),
    ("LeakyReLU", {"act_type": "rrelu", "lower_bound": 0.2, "upper_bound": 0.4}, [(5, 7)]),
    ("LeakyReLU", {"act_type": "prelu"}, [(2, 3, 4), (3,)]),
    ("LeakyReLU", {"act_type": "prelu"}, [(2, 3, 4, 2), (1,)]),
    ("Dropout", {}, [(2, 3, 4)]),
    ("Dropout", {"p": 0.1, "axes": (1,)}, [(4, 6)]),
    ("Dropout", {"p": 0.3, "mode": "always", "cudnn_off": True}, [(4, 6)]),
    # Embedding's data are token ids stored as floats (see _inputs)
    ("Embedding", {"input_dim": 10, "output_dim": 4}, [(2, 5), (10, 4)]),
    ("Embedding", {"input_dim": 7, "output_dim": 3, "dtype": "float32", "sparse_grad": False},
     [(6,), (7, 3)]),
    # element-wise arithmetic
    ("elemwise_sub", {}, [(2, 3, 4), (2, 3, 4)]),
    ("elemwise_mul", {}, [(5, 7), (5, 7)]),
    ("elemwise_div", {}, [(5, 7), (5, 7)]),
    ("_power", {}, [(4, 5), (4, 5)]),
    ("_maximum", {}, [(4, 5), (4, 5)]),
    ("_minimum", {}, [(4, 5), (4, 5)]),
    ("broadcast_add", {}, [(2, 3, 4), (3, 1)]),
    ("broadcast_add", {}, [(1, 32, 8), (1, 32, 8)]),
    ("broadcast_plus", {}, [(4,), (2, 3, 1)]),
    ("broadcast_sub", {}, [(1, 4), (3, 1)]),
    ("broadcast_minus", {}, [(4, 1, 3), (1, 5, 1)]),
    ("broadcast_mul", {}, [(2, 1, 4), (4,)]),
    ("broadcast_div", {}, [(3, 4), (1, 4)]),
    ("broadcast_div", {}, [(1,), (2, 2, 3, 2)]),
    ("broadcast_power", {}, [(3, 4), (3, 1)]),
    ("broadcast_maximum", {}, [(2, 1, 3), (2, 4, 1)]),
    ("broadcast_minimum", {}, [(5, 1), (1, 6)]),
    ("_plus_scalar", {"scalar": 2.5}, [(3, 4)]),
    ("_minus_scalar", {"scalar": 1.5, "is_int": False}, [(3, 4)]),
    ("_rminus_scalar", {"scalar": 3}, [(3, 4)]),
    ("_mul_scalar", {"scalar": 0.17677669529663687}, [(2, 3, 4)]),
    ("_div_scalar", {"scalar": 4}, [(3, 4)]),
    ("_rdiv_scalar", {"scalar": 2.0, "is_int": False}, [(3, 4)]),
    ("_power_scalar", {"scalar": 2}, [(3, 4)]),
    ("_power_scalar", {"scalar": 0.5, "is_int": False}, [(3, 4)]),
    ("_rpower_scalar", {"scalar": 2}, [(3, 4)]),
    ("_maximum_scalar", {"scalar": 0.5, "is_int": False}, [(3, 4)]),
    ("_minimum_scalar", {"scalar": -1}, [(3, 4)]),
    ("_PlusScalar", {"scalar": -2}, [(6,)]),
    ("add_n", {"num_args": 3}, [(2, 3), (2, 3), (2, 3)]),
    ("ElementWiseSum", {"num_args": 1}, [(4, 2)]),
    ("clip", {"a_min": -1.5, "a_max": 2.0}, [(4, 6)]),
    ("clip", {"a_min": 0, "a_max": 6}, [(2, 3, 4)]),
    ("zeros_like", {}, [(3, 4)]),
    ("ones_like", {}, [(2, 3, 2)]),
    # element-wise math
    *[(op, {}, [(3, 5)]) for op in (
        "abs", "negative", "square", "reciprocal", "sqrt", "rsqrt", "cbrt", "exp", "expm1",
        "log", "log1p", "log2", "log10", "sin", "cos", "tanh", "sigmoid", "relu", "erf",
        "sign", "floor", "ceil", "trunc", "fix", "round", "rint")],
    ("exp", {}, [(2, 3, 4)]),
    # shapes and copies
    ("_copy", {}, [(2, 3)]),
    ("identity", {}, [(4,)]),
    ("BlockGrad", {}, [(2, 3)]),
    ("stop_gradient", {}, [(2, 2, 2)]),
    ("flatten", {}, [(2, 3, 4)]),
    ("Reshape", {"shape": (-1,)}, [(2, 3, 4)]),
    ("Reshape", {"shape": (0, -1)}, [(2, 3, 4)]),
    ("Reshape", {"shape": (6, -1)}, [(2, 3, 4)]),
    ("Reshape", {"shape": (-1, 4, 2)}, [(2, 16)]),
    ("Reshape", {"shape": (0, 0, 4, -1)}, [(2, 3, 8)]),
    ("Reshape", {"shape": (-2, 1)}, [(2, 3)]),
    ("Reshape", {"shape": (-3, 0)}, [(2, 3, 4)]),
    ("Reshape", {"shape": (-3, -2)}, [(2, 3, 4, 5)]),
    ("Reshape", {"shape": (-4, 1, 2, -2)}, [(2, 3, 4)]),
    ("Reshape", {"shape": (-4, -1, 4, 0, 0)}, [(8, 3, 5)]),
    ("Reshape", {"shape": (-4, 2, -1, -3)}, [(6, 2, 5)]),
    ("Reshape", {"shape": (-1, 0), "reverse": True}, [(2, 3, 4)]),
    ("Reshape", {"target_shape": (0, 4)}, [(2, 3, 4)]),
    ("Reshape", {"target_shape": (0, 3, 0), "keep_highest": True}, [(2, 3, 4)]),
    ("reshape", {"shape": (4, -1)}, [(2, 6)]),
    ("expand_dims", {"axis": 0}, [(3, 4)]),
    ("expand_dims", {"axis": 2}, [(3, 4)]),
    ("expand_dims", {"axis": -1}, [(3, 4)]),
    ("expand_dims", {"axis": -3}, [(3, 4)]),
    ("squeeze", {}, [(1, 3, 1, 2)]),
    ("squeeze", {"axis": (0,)}, [(1, 3, 1, 2)]),
    ("squeeze", {"axis": (-2, 0)}, [(1, 3, 1, 2)]),
    ("squeeze", {}, [(1, 1)]),
    ("transpose", {}, [(2, 3, 4)]),
    ("transpose", {"axes": (0, 2, 1, 3)}, [(2, 3, 4, 5)]),
    ("transpose", {"axes": (1, 0)}, [(3, 5)]),
    ("transpose", {"axes": (2, 0, 1)}, [(4, 1, 3)]),
    ("Concat", {"num_args": 2}, [(2, 3, 4), (2, 5, 4)]),
    ("Concat", {"num_args": 3, "dim": 0}, [(1, 2, 2), (3, 2, 2), (2, 2, 2)]),
    ("Concat", {"num_args": 1, "dim": 0}, [(4, 3)]),
    ("concat", {"num_args": 2, "dim": -1}, [(3, 2), (3, 4)]),
    ("SliceChannel", {"num_outputs": 3, "axis": -1}, [(2, 4, 6)]),
    ("SliceChannel", {"num_outputs": 2}, [(2, 4, 3)]),
    ("SliceChannel", {"num_outputs": 3, "axis": 0, "squeeze_axis": True}, [(3, 2, 2)]),
    ("split", {"num_outputs": 2, "axis": 2, "squeeze_axis": True}, [(2, 3, 2)]),
    ("split", {"num_outputs": 4, "axis": 0, "squeeze_axis": True}, [(4,)]),
    ("split", {"num_outputs": 1}, [(2, 3)]),
    ("slice_axis", {"axis": 1, "begin": 0, "end": 1}, [(2, 4, 3)]),
    ("slice_axis", {"axis": -1, "begin": -3, "end": "None"}, [(2, 5)]),
    ("slice_axis", {"axis": 0, "begin": 1, "end": -1}, [(5, 2)]),
    # reductions
    ("sum", {}, [(2, 3, 4)]),
    ("sum", {"axis": 1}, [(2, 3, 4)]),
    ("sum", {"axis": (0, 2), "keepdims": True}, [(2, 3, 4)]),
    ("sum", {"axis": 1, "exclude": True}, [(2, 3, 4)]),
    ("sum_axis", {"axis": -1}, [(3, 5)]),
    ("mean", {}, [(4, 5)]),
    ("mean", {"axis": (1, -1)}, [(2, 3, 4)]),
    ("mean", {"axis": 0, "keepdims": True}, [(3, 4)]),
    ("max", {}, [(3, 4)]),
    ("max", {"axis": 0}, [(3, 4, 2)]),
    ("max_axis", {"axis": (0, 1), "exclude": True, "keepdims": True}, [(3, 4, 2)]),
    ("min", {"axis": -1, "keepdims": True}, [(3, 4)]),
    ("min", {"axis": ()}, [(2, 3)]),
    # matrix products
    ("dot", {}, [(3, 4), (4, 5)]),
    ("dot", {"transpose_a": True}, [(4, 3), (4, 5)]),
    ("dot", {"transpose_b": True}, [(3, 4), (5, 4)]),
    ("dot", {"transpose_a": True, "transpose_b": True}, [(4, 3), (5, 4)]),
    ("dot", {}, [(6,), (6,)]),
    ("dot", {}, [(3,), (3, 4)]),
    ("dot", {}, [(2, 3, 4), (4, 5)]),
    ("dot", {"transpose_b": True}, [(2, 4), (3, 2, 4)]),
    ("batch_dot", {}, [(2, 3, 4), (2, 4, 5)]),
    ("batch_dot", {"transpose_b": True}, [(2, 3, 4), (2, 5, 4)]),
    ("batch_dot", {"transpose_a": True}, [(2, 4, 3), (2, 4, 5)]),
    ("batch_dot", {"transpose_a": True, "transpose_b": True}, [(3, 4, 2), (3, 5, 4)]),
    ("batch_dot", {}, [(2, 2, 3, 4), (2, 2, 4, 2)]),
    # ---- operators added to cover the whole registry ----
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4}, [(1, 3, 4, 5), (3, 4, 3, 3)]),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "pad": (1, 1),
                       "adj": (1, 0), "no_bias": False}, [(2, 3, 4, 4), (3, 4, 3, 3), (4,)]),
    ("Deconvolution", {"kernel": (2, 3), "num_filter": 6, "num_group": 2, "stride": (2, 1),
                       "dilate": (2, 1)}, [(1, 4, 3, 4), (4, 3, 2, 3)]),
    ("Deconvolution", {"kernel": (4, 4), "num_filter": 2, "stride": (2, 2),
                       "target_shape": (9, 8)}, [(1, 2, 4, 4), (2, 2, 4, 4)]),
    ("Deconvolution", {"kernel": (3,), "num_filter": 2, "stride": (2,), "pad": (1,),
                       "no_bias": False}, [(2, 3, 5), (3, 2, 3), (2,)]),
    ("Deconvolution", {"kernel": (2, 2, 2), "num_filter": 2, "stride": (2, 1, 1)},
     [(1, 2, 2, 3, 3), (2, 2, 2, 2, 2)]),
    ("InstanceNorm", {}, [(2, 3, 4, 5), (3,), (3,)]),
    ("InstanceNorm", {"eps": 1e-5}, [(2, 4, 6), (4,), (4,)]),
    ("UpSampling", {"scale": 2, "sample_type": "nearest", "num_args": 1}, [(1, 2, 3, 4)]),
    ("UpSampling", {"scale": 2, "sample_type": "nearest", "num_args": 2},
     [(1, 2, 2, 3), (1, 3, 4, 6)]),
    ("UpSampling", {"scale": 3, "sample_type": "nearest", "num_args": 2,
                    "multi_input_mode": "sum"}, [(2, 2, 2, 2), (2, 2, 3, 3)]),
    ("Pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 2, 1), "constant_value": 1.5},
     [(1, 2, 3, 4)]),
    ("Pad", {"mode": "edge", "pad_width": (0, 0, 0, 0, 2, 2, 1, 3)}, [(2, 1, 3, 3)]),
    ("pad", {"mode": "reflect", "pad_width": (0, 0, 0, 0, 1, 2, 2, 1)}, [(1, 2, 3, 4)]),
    ("Pad", {"pad_width": (0, 0, 0, 0, 1, 0, 0, 1, 1, 1)}, [(1, 1, 2, 2, 3)]),
    ("SoftmaxOutput", {}, [(3, 5), (3,)]),
    ("SoftmaxOutput", {"multi_output": True}, [(2, 3, 4), (2, 4)]),
    ("SoftmaxOutput", {"preserve_shape": True, "grad_scale": 2.0, "normalization": "batch"},
     [(2, 3, 4), (2, 3)]),
    ("Softmax", {}, [(2, 3, 4), (2, 3, 4)]),
    ("SoftmaxActivation", {}, [(3, 5)]),
    ("SoftmaxActivation", {}, [(2, 3, 4)]),
    ("SoftmaxActivation", {"mode": "channel"}, [(2, 3, 4)]),
    ("Activation", {"act_type": "log_sigmoid"}, [(5, 7)]),
    ("Activation", {"act_type": "mish"}, [(5, 7)]),
    ("BatchNorm", {"output_mean_var": True, "fix_gamma": False},
     [(2, 3, 4), (3,), (3,), (3,), (3,)]),
    ("Pooling", {"kernel": (2, 2), "pool_type": "lp", "p_value": 2}, [(1, 2, 5, 5)]),
    ("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "lp",
                 "p_value": 3}, [(1, 2, 6, 5)]),
    ("Pooling", {"kernel": (2,), "pool_type": "lp", "p_value": 1}, [(2, 2, 5)]),
    ("Pooling", {"kernel": (3,), "stride": (2,), "pooling_convention": "same"}, [(2, 3, 7)]),
    ("Pooling", {"kernel": (2,), "stride": (3,), "pooling_convention": "same",
                 "pool_type": "avg"}, [(1, 2, 8)]),
    ("softmax", {"dtype": "float16"}, [(3, 6)]),
    ("log_softmax", {"axis": 0, "dtype": "float32"}, [(4, 3)]),
    # comparisons, logical operations, mod and hypot (inputs of few values,
    # so that ties and zeros occur; see _inputs in test_cpu_ref_ops.py)
    *[(op, {}, [(3, 4), (3, 4)]) for op in (
        "_equal", "_not_equal", "_greater", "_greater_equal", "_lesser", "_lesser_equal",
        "_logical_and", "_logical_or", "_logical_xor", "_mod", "_hypot", "_Equal", "_Mod")],
    *[(op, {}, [(2, 3, 4), (3, 1)]) for op in (
        "broadcast_equal", "broadcast_not_equal", "broadcast_greater",
        "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
        "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor",
        "broadcast_mod", "broadcast_hypot")],
    *[(op, {"scalar": 1.0}, [(3, 4)]) for op in (
        "_equal_scalar", "_not_equal_scalar", "_greater_scalar", "_greater_equal_scalar",
        "_lesser_scalar", "_lesser_equal_scalar", "_logical_and_scalar", "_logical_or_scalar",
        "_logical_xor_scalar", "_EqualScalar")],
    ("_logical_and_scalar", {"scalar": 0}, [(3, 4)]),
    ("_mod_scalar", {"scalar": 2.5}, [(3, 4)]),
    ("_mod_scalar", {"scalar": -1.5, "is_int": False}, [(3, 4)]),
    ("_rmod_scalar", {"scalar": 3}, [(3, 4)]),
    ("_hypot_scalar", {"scalar": 4}, [(3, 4)]),
    # more element-wise math
    *[(op, {}, [(3, 5)]) for op in (
        "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh",
        "degrees", "radians", "rcbrt", "logical_not")],
    # more reductions (nansum and nanprod get NaNs among their inputs)
    ("prod", {"axis": 1}, [(3, 4)]),
    ("prod", {}, [(2, 3)]),
    ("nansum", {}, [(3, 4)]),
    ("nansum", {"axis": 0, "keepdims": True}, [(3, 4)]),
    ("nanprod", {"axis": (0, 2)}, [(2, 3, 2)]),
    # Cast (integer and other float targets)
    *[("Cast", {"dtype": dtype}, [(3, 4)]) for dtype in (
        "float16", "float64", "uint8", "int8", "int32", "int64", "float32")],
    ("cast", {"dtype": "int32"}, [(5,)]),
    # indexing and searching
    ("take", {}, [(5, 3), (2, 4)]),
    ("take", {"axis": 1, "mode": "wrap"}, [(2, 4, 3), (5,)]),
    ("take", {"axis": -1, "mode": "raise"}, [(3, 6), (2, 2)]),
    ("where", {}, [(3, 4), (3, 4), (3, 4)]),
    ("where", {}, [(3,), (3, 4), (3, 4)]),
    ("argmax", {"axis": 1}, [(3, 4)]),
    ("argmax", {"axis": 0, "keepdims": True}, [(3, 4, 2)]),
    ("argmin", {}, [(3, 4)]),
    ("argmin", {"axis": -1}, [(5,)]),
    ("argmin", {"keepdims": True}, [(2, 3)]),
    ("topk", {}, [(3, 5)]),
    ("topk", {"k": 3, "ret_typ": "value"}, [(3, 5)]),
    ("topk", {"k": 2, "ret_typ": "both", "axis": 0}, [(4, 3)]),
    ("topk", {"k": 2, "ret_typ": "mask"}, [(3, 5)]),
    ("topk", {"k": 0, "is_ascend": True, "ret_typ": "both"}, [(2, 6)]),
    ("topk", {"axis": "None", "k": 4, "dtype": "int32"}, [(3, 4)]),
    ("topk", {"k": 2, "axis": 1, "dtype": "float16", "ret_typ": "both"}, [(2, 5, 2)]),
    ("topk", {"k": 2, "dtype": "uint8"}, [(2, 7)]),
    ("topk", {"k": 1, "dtype": "int64", "is_ascend": True}, [(4, 3)]),
    ("topk", {"k": 2, "dtype": "float64"}, [(3, 4)]),
    # slicing, joining and replicating
    ("slice", {"begin": (0, 1), "end": (2, 3)}, [(3, 4)]),
    ("slice", {"begin": (None, -1), "end": (None, 0), "step": (1, -1)}, [(3, 4)]),
    ("slice", {"begin": (1,), "end": (None,)}, [(4, 3)]),
    ("slice", {"begin": (0, None, 1), "end": (2, None, -1), "step": (2, -1, None)},
     [(3, 4, 5)]),
    ("crop", {"begin": (1, 1), "end": (3, 4)}, [(4, 5)]),
    ("slice_like", {}, [(4, 5), (2, 3)]),
    ("slice_like", {"axes": (1,)}, [(4, 5), (9, 2)]),
    ("slice_like", {"axes": (0, -1)}, [(3, 4, 5), (2, 9, 3)]),
    ("stack", {"axis": 1, "num_args": 3}, [(2, 3), (2, 3), (2, 3)]),
    ("stack", {"num_args": 2}, [(4,), (4,)]),
    ("stack", {"axis": -1, "num_args": 2}, [(2, 3), (2, 3)]),
    ("tile", {"reps": (2, 3)}, [(2, 3)]),
    ("tile", {"reps": (2, 1, 2)}, [(3, 2)]),
    ("tile", {"reps": (2,)}, [(2, 3)]),
    ("repeat", {"repeats": 2}, [(2, 3)]),
    ("repeat", {"repeats": 3, "axis": 1}, [(2, 3)]),
    ("repeat", {"repeats": 2, "axis": -3}, [(2, 1, 2)]),
    ("broadcast_to", {"shape": (2, 3, 4)}, [(2, 1, 4)]),
    ("broadcast_to", {"shape": (0, 3)}, [(4, 1)]),
    ("broadcast_axis", {"axis": (0, 2), "size": (3, 4)}, [(1, 2, 1)]),
    ("broadcast_axes", {"axis": 1, "size": 5}, [(2, 1)]),
    ("broadcast_like", {}, [(1, 3), (2, 3)]),
    ("broadcast_like", {"lhs_axes": (0,), "rhs_axes": (1,)}, [(1, 3), (2, 5)]),
]

# Operators whose float16 variant needs more than every input in float16.
_FLOAT16_DTYPES: dict[str, tuple[str, ...]] = {
    # float16 data keeps its parameters and statistics in float32
    "BatchNorm": ("float16", "float32", "float32", "float32", "float32"),
}
# The attributes a float16 variant changes.
_FLOAT16_ATTRS: dict[str, dict[str, Any]] = {
    "Embedding": {"dtype": "float16"},  # the weight's (and output's) dtype
}

# Operators that run integers: those that move elements, the predicates, and
# take/where/Cast/Embedding (whose indices and conditions may be integers).
_MOVING = ("_copy", "identity", "BlockGrad", "stop_gradient", "Flatten", "flatten", "Reshape",
           "reshape", "expand_dims", "squeeze", "transpose", "Concat", "concat",
           "SliceChannel", "split", "slice_axis", "slice", "crop", "slice_like", "stack",
           "tile", "repeat", "broadcast_to", "broadcast_axis", "broadcast_axes",
           "broadcast_like", "Pad", "pad", "Dropout", "zeros_like", "ones_like")
_PREDICATES = ("_equal", "_not_equal", "_greater", "_greater_equal", "_lesser",
               "_lesser_equal", "_logical_and", "_logical_or", "_logical_xor", "_Equal",
               "broadcast_equal", "broadcast_not_equal", "broadcast_greater",
               "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
               "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor",
               "_equal_scalar", "_not_equal_scalar", "_greater_scalar",
               "_greater_equal_scalar", "_lesser_scalar", "_lesser_equal_scalar",
               "_logical_and_scalar", "_logical_or_scalar", "_logical_xor_scalar",
               "_EqualScalar", "logical_not")
_INTEGERS = ("int8", "uint8", "int32", "int64")


def _float16_variants(cases: list[Case]) -> list[Case]:
    """The first case of every operator name, in float16."""
    seen: set[str] = set()
    variants = []
    for case in cases:
        if case.op in seen:
            continue
        seen.add(case.op)
        dtypes = _FLOAT16_DTYPES.get(case.op, "float16")
        variants.append(Case(case.op, {**case.attrs, **_FLOAT16_ATTRS.get(case.op, {})},
                             case.shapes, dtypes))
    return variants


def _integer_variants(cases: list[Case], names: tuple[str, ...]) -> list[Case]:
    """The first case of each of names in an integer dtype, the dtypes taken
    in turn (int64 and int8 for every other one)."""
    variants = []
    for index, name in enumerate(names):
        case = next(case for case in cases if case.op == name)
        dtype = _INTEGERS[index % len(_INTEGERS)]
        variants.append(case._replace(dtypes=dtype))
    return variants


_FLOAT32_CASES = [Case(*case) for case in _FLOAT32]

CASES: list[Case] = [
    *_FLOAT32_CASES,
    *_float16_variants(_FLOAT32_CASES),
    *_integer_variants(_FLOAT32_CASES, _MOVING),
    *_integer_variants(_FLOAT32_CASES, _PREDICATES),
    # every integer dtype through a few shape operators, and float64
    *[Case("transpose", {"axes": (1, 0)}, [(3, 5)], dtype) for dtype in (*_INTEGERS, "float64")],
    *[Case("Concat", {"num_args": 2, "dim": 0}, [(1, 3), (2, 3)], dtype)
      for dtype in (*_INTEGERS, "float64")],
    *[Case("Pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 1, 0, 2),
                   "constant_value": -2.7}, [(1, 2, 2, 3)], dtype) for dtype in _INTEGERS],
    *[Case("_greater_scalar", {"scalar": 2.5}, [(4, 5)], dtype) for dtype in _INTEGERS],
    Case("_equal", {}, [(6,), (6,)], "int64"),  # values beyond 2^53 (see _inputs)
    # Cast between every pair of dtypes
    *[Case("Cast", {"dtype": to}, [(3, 4)], source)
      for source in ("float32", "float16", "float64", *_INTEGERS)
      for to in ("float32", "float16", "float64", *_INTEGERS) if source != "float32"],
    # indices and conditions of other dtypes than the data's
    Case("take", {"axis": 1}, [(3, 5), (4,)], ("int8", "int32")),
    Case("take", {"mode": "wrap"}, [(4, 2), (2, 3)], ("int64", "float32")),
    Case("take", {"axis": 0, "mode": "raise"}, [(4, 3), (5,)], ("float16", "int64")),
    Case("take", {}, [(6,), (3,)], ("uint8", "float16")),
    Case("where", {}, [(3, 4), (3, 4), (3, 4)], ("int8", "int32", "int32")),
    Case("where", {}, [(3,), (3, 4), (3, 4)], ("uint8", "float16", "float16")),
    Case("where", {}, [(2, 3), (2, 3), (2, 3)], ("float32", "uint8", "uint8")),
    Case("Embedding", {"input_dim": 6, "output_dim": 3, "dtype": "int8"}, [(4,), (6, 3)],
         ("int32", "int8")),
    Case("Embedding", {"input_dim": 5, "output_dim": 2, "dtype": "float64"}, [(2, 3), (5, 2)],
         ("float16", "float64")),
    Case("slice_like", {}, [(4, 5), (2, 3)], ("int32", "float32")),
    Case("broadcast_like", {}, [(1, 3), (2, 3)], ("uint8", "float16")),
    # float16 beyond the first case of each operator
    Case("softmax", {"dtype": "float32", "axis": 0}, [(4, 3)], "float16"),
    Case("BatchNorm", {"output_mean_var": True, "fix_gamma": False},
         [(2, 3, 4), (3,), (3,), (3,), (3,)], _FLOAT16_DTYPES["BatchNorm"]),
    Case("LayerNorm", {"axis": 0, "output_mean_var": True}, [(4, 3), (4,), (4,)], "float16"),
    Case("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full",
                     "pad": (1, 1)}, [(1, 2, 6, 6)], "float16"),
    Case("Pooling", {"kernel": (1,), "stride": (3,), "pooling_convention": "full"},
         [(1, 1, 2)], "float16"),  # an empty window: float16's lowest value
    Case("add_n", {"num_args": 4}, [(3, 4)] * 4, "float16"),
    Case("_mul_scalar", {"scalar": 0.1}, [(3, 4)], "float16"),
    Case("clip", {"a_min": -0.1, "a_max": 0.3}, [(3, 4)], "float16"),
    Case("Convolution", {"kernel": (3, 3), "num_filter": 6, "num_group": 2, "pad": (1, 1)},
         [(1, 4, 5, 5), (6, 2, 3, 3), (6,)], "float16"),
    Case("FullyConnected", {"num_hidden": 5, "flatten": False}, [(2, 3, 4), (5, 4), (5,)],
         "float16"),
    Case("topk", {"k": 2, "ret_typ": "both", "axis": 0}, [(4, 3)], "float16"),
]


# ---- the ONNX importer's host operators (acc_host/ops/onnx_ops.py) ----------------------
# Each one in float32 and float16, and in the integer dtypes (and float64)
# where it runs them; index inputs get valid positions (see _inputs in
# tests/plugins/cpu_ref/test_cpu_ref_ops.py).
_ALL = ("float32", "float16", "float64", "uint8", "int8", "int32", "int64")
_FLOATS = ("float32", "float16", "float64")
_ONNX_UNARY_EXACT = ("relu", "abs", "neg", "sign", "round", "floor", "ceil", "identity")
_ONNX_UNARY_FLOAT = ("softsign", "softplus", "selu", "elu", "celu", "leaky_relu",
                     "thresholded_relu", "hard_sigmoid", "hard_swish", "mish", "swish", "gelu",
                     "shrink", "sigmoid", "reciprocal", "sqrt", "exp", "log", "erf")


def _each(op: str, attrs: dict[str, Any], shapes: list[tuple[int, ...]],
          dtypes: tuple[str, ...] = _ALL, others: tuple[str, ...] = ()) -> list[Case]:
    """The case in every dtype of dtypes (others: the dtypes of the inputs
    after the first, when they do not follow it)."""
    return [Case(op, attrs, shapes, (dtype, *others) if others else dtype) for dtype in dtypes]


ONNX_CASES: list[Case] = [
    *[case for fn in _ONNX_UNARY_EXACT for case in _each("_onnx_unary", {"fn": fn}, [(3, 5)])],
    *[case for fn in _ONNX_UNARY_FLOAT for case in _each("_onnx_unary", {"fn": fn}, [(3, 5)],
                                                          _FLOATS)],
    Case("_onnx_unary", {"fn": "selu", "alpha": 1.5, "gamma": 2.0}, [(2, 4)]),
    Case("_onnx_unary", {"fn": "gelu", "approximate": "tanh"}, [(2, 4)]),
    Case("_onnx_unary", {"fn": "shrink", "alpha": 0.5, "beta": 0.25}, [(2, 4)]),
    Case("_onnx_unary", {"fn": "hard_sigmoid", "alpha": 0.3, "beta": 0.4}, [(2, 4)]),
    *_each("_onnx_unary", {"fn": "bitwise_not"}, [(3, 4)], ("uint8", "int8", "int32", "int64")),
    *[case for fn in ("add", "sub", "mul", "div", "mod", "prelu")
      for case in _each("_onnx_binary", {"fn": fn}, [(2, 3, 4), (3, 1)])],
    *_each("_onnx_binary", {"fn": "mod", "fmod": True}, [(3, 4), (3, 4)]),
    *_each("_onnx_binary", {"fn": "pow"}, [(3, 4), (4,)], _FLOATS),
    Case("_onnx_binary", {"fn": "pow"}, [(3, 4), (4,)], ("float32", "int64")),
    *_each("_onnx_binary", {"fn": "pow"}, [(3, 4), (4,)], ("int32", "int64", "uint8")),
    *[case for fn in ("bitshift_left", "bitshift_right", "bitwise_and", "bitwise_or",
                      "bitwise_xor")
      for case in _each("_onnx_binary", {"fn": fn}, [(3, 4), (4,)],
                        ("uint8", "int8", "int32", "int64"))],
    *[case for fn in ("sum", "max", "min", "mean")
      for case in _each("_onnx_nary", {"fn": fn, "num_args": 3}, [(2, 3), (3,), (2, 1)])],
    *_each("_onnx_nary", {"fn": "sum", "num_args": 1}, [(4,)], ("float32", "float16")),
    *_each("_onnx_where", {}, [(3, 4), (3, 4), (4,)], _ALL, ()),
    Case("_onnx_where", {}, [(2, 1), (2, 3), (3,)], ("int32", "float16", "float16")),
    Case("_onnx_where", {}, [(3,), (2, 3), (1,)], ("float32", "int64", "int64")),
    *_each("_onnx_clip", {"a_min": -1.5, "a_max": 2.5}, [(3, 5)]),
    *_each("_onnx_clip", {"a_min": 0.5}, [(3, 5)], ("float32", "float16", "int8")),
    *_each("_onnx_clip", {"a_max": 1}, [(3, 5)], ("float32", "float16", "uint8")),
    *[Case("_onnx_cast", {"dtype": to}, [(3, 4)], source) for source in _ALL for to in _ALL],
    *[Case("_onnx_cast_like", {}, [(3, 4), (2,)], (source, to))
      for source, to in (("float32", "int8"), ("float16", "float64"), ("int64", "float16"),
                         ("uint8", "int32"), ("float32", "float32"))],
    *_each("_onnx_shape", {}, [(2, 3, 4)], ("float32", "float16", "int8")),
    Case("_onnx_shape", {"start": 1}, [(2, 3, 4)]),
    Case("_onnx_shape", {"start": -2, "end": -1}, [(2, 3, 4, 5)]),
    Case("_onnx_shape", {"start": 0, "end": 10}, [(2, 3)], "float16"),
    *_each("_onnx_size", {}, [(2, 3, 4)], ("float32", "float16", "int64")),
    *_each("_onnx_flatten", {"axis": 1}, [(2, 3, 4)]),
    Case("_onnx_flatten", {"axis": 0}, [(2, 3, 4)]),
    Case("_onnx_flatten", {"axis": -1}, [(2, 3, 4)], "float16"),
    Case("_onnx_flatten", {"axis": 3}, [(2, 3, 4)]),
    *_each("_onnx_reshape", {"shape": (4, -1)}, [(2, 3, 4)]),
    Case("_onnx_reshape", {"shape": (0, 12)}, [(2, 3, 4)]),
    Case("_onnx_reshape", {"shape": (0, 3), "allowzero": True}, [(0, 4)]),
    Case("_onnx_reshape", {"shape": (-1,)}, [(2, 3)], "float16"),
    *_each("_onnx_expand", {"shape": (2, 3, 4)}, [(3, 1)]),
    Case("_onnx_expand", {"shape": (3, 1)}, [(2, 1, 4)]),
    Case("_onnx_expand", {"shape": (1,)}, [(2, 3)], "float16"),
    *_each("_onnx_unsqueeze", {"axes": (0, 3)}, [(2, 3)]),
    Case("_onnx_unsqueeze", {"axes": (-1,)}, [(2, 3)], "float16"),
    Case("_onnx_unsqueeze", {"axes": (1, -1)}, [(3,)]),
    *_each("_onnx_squeeze", {"axes": (0, -1)}, [(1, 3, 1)]),
    Case("_onnx_squeeze", {}, [(1, 3, 1, 2)], "float16"),
    *_each("_onnx_transpose", {}, [(2, 3, 4)]),
    Case("_onnx_transpose", {"perm": (0, 2, 1, 3)}, [(2, 3, 4, 5)]),
    Case("_onnx_transpose", {"perm": (1, 0)}, [(3, 5)], "float16"),
    *_each("_onnx_slice", {"starts": (1, 0), "ends": (3, -1)}, [(4, 5)]),
    Case("_onnx_slice", {"starts": (-1,), "ends": (-10,), "axes": (1,), "steps": (-2,)},
         [(3, 6)]),
    Case("_onnx_slice", {"starts": (0, 2**62), "ends": (2**62, 0), "axes": (-1, 0),
                         "steps": (3, -1)}, [(4, 7)], "float16"),
    Case("_onnx_slice", {"starts": (10,), "ends": (20,)}, [(4, 2)]),
    *_each("_onnx_split", {"axis": 1, "split": (1, 3)}, [(2, 4, 3)]),
    Case("_onnx_split", {"axis": -1, "num_outputs": 3}, [(2, 7)]),
    Case("_onnx_split", {"axis": 0, "split": (2, 2, 1)}, [(5, 2)], "float16"),
    Case("_onnx_split", {"num_outputs": 1}, [(3,)], "int8"),
    *_each("_onnx_concat", {"axis": 1, "num_args": 3}, [(2, 1, 3), (2, 0, 3), (2, 4, 3)]),
    Case("_onnx_concat", {"axis": -1, "num_args": 2}, [(2, 3), (2, 2)], "float16"),
    *_each("_onnx_pad", {"pads": (1, 0, 2, 3)}, [(2, 3)]),
    *[Case("_onnx_pad", {"pads": (0, 4, 0, 5), "mode": mode}, [(2, 3)], dtype)
      for mode in ("reflect", "edge", "wrap") for dtype in ("float32", "float16", "int32")],
    Case("_onnx_pad", {"pads": (2, -1), "axes": (-1,), "value": 2.5}, [(2, 4)]),
    Case("_onnx_pad", {"pads": (0, 0, 0, 0, -1, 1, 1, -2), "value": -3.7}, [(1, 2, 3, 4)],
         "int8"),
    Case("_onnx_pad", {"pads": (1, 1), "mode": "reflect"}, [(1,)]),
    *_each("_onnx_tile", {"reps": (2, 3)}, [(2, 3)]),
    Case("_onnx_tile", {"reps": (2, 1, 2)}, [(3, 2)], "float16"),
    Case("_onnx_tile", {"reps": (2,)}, [(2, 3)]),
    *_each("_onnx_gather", {"axis": 1}, [(3, 5, 2), (2, 3)], _ALL, ("int64",)),
    Case("_onnx_gather", {}, [(4, 3), (5,)], ("float16", "int32")),
    Case("_onnx_gather", {"axis": -1}, [(3, 4), ()], ("float32", "int8")),
    *_each("_onnx_gather_elements", {"axis": 1}, [(3, 4), (3, 2)], _ALL, ("int64",)),
    Case("_onnx_gather_elements", {"axis": 0}, [(3, 4), (5, 4)], ("float16", "int32")),
    *_each("_onnx_gather_nd", {}, [(3, 4, 2), (5, 2)], _ALL, ("int64",)),
    Case("_onnx_gather_nd", {"batch_dims": 1}, [(2, 3, 4), (2, 2, 1)], ("float16", "int32")),
    Case("_onnx_gather_nd", {}, [(3, 4), (2, 2)], ("int8", "int64")),
    *[case for reduction in ("none", "add", "mul", "max", "min")
      for case in _each("_onnx_scatter_elements", {"axis": 1, "reduction": reduction},
                        [(3, 5), (3, 2), (3, 2)], ("float32", "float16", "int32", "uint8"))],
    Case("_onnx_scatter_elements", {"axis": -2}, [(4, 3), (2, 3), (2, 3)],
         ("float64", "int64", "float64")),
    *[case for reduction in ("none", "add", "mul", "max", "min")
      for case in _each("_onnx_scatter_nd", {"reduction": reduction}, [(4, 3), (2, 1), (2, 3)],
                        ("float32", "float16", "int8", "int64"))],
    Case("_onnx_scatter_nd", {}, [(2, 3, 4), (2, 2), (2, 4)], ("float64", "int32", "float64")),
    *_each("_onnx_depth_to_space", {"blocksize": 2}, [(1, 8, 2, 3)]),
    Case("_onnx_depth_to_space", {"blocksize": 2, "mode": "CRD"}, [(2, 8, 2, 2)]),
    Case("_onnx_depth_to_space", {"blocksize": 3, "mode": "CRD"}, [(1, 9, 1, 2)], "float16"),
    *_each("_onnx_space_to_depth", {"blocksize": 2}, [(1, 2, 4, 6)]),
    *_each("_onnx_trilu", {}, [(2, 3, 4)]),
    Case("_onnx_trilu", {"upper": False, "k": -1}, [(4, 3)]),
    Case("_onnx_trilu", {"upper": True, "k": 2}, [(3, 5)], "float16"),
    *_each("_onnx_eye_like", {}, [(3, 4)]),
    Case("_onnx_eye_like", {"k": -1, "dtype": "int32"}, [(4, 3)]),
    Case("_onnx_eye_like", {"k": 2, "dtype": "float16"}, [(2, 5)], "int8"),
    *_each("_onnx_reverse_sequence", {}, [(4, 3, 2), (3,)], _ALL, ("int64",)),
    Case("_onnx_reverse_sequence", {"batch_axis": 0, "time_axis": 1}, [(3, 5), (3,)],
         ("float16", "int32")),
    *_each("_onnx_one_hot", {"depth": 4}, [(2, 3), (2,)], ("int64",), ()),
    *[Case("_onnx_one_hot", {"depth": 5, "axis": 0}, [(3,), (2,)], ("int32", dtype))
      for dtype in _ALL],
    Case("_onnx_one_hot", {"depth": 3, "axis": 1}, [(2, 2), (2,)], ("float32", "float16")),
    Case("_onnx_one_hot", {"depth": 2}, [(3,), (2,)], ("float16", "int8")),
    *[case for fn in ("sum", "mean", "max", "min", "prod", "l1", "l2", "log_sum",
                      "log_sum_exp", "sum_square")
      for case in _each("_onnx_reduce", {"fn": fn, "axes": (1,)}, [(2, 3, 4)],
                        _ALL if fn != "log_sum_exp" else (*_FLOATS, "int32", "int64"))],
    Case("_onnx_reduce", {"fn": "sum", "keepdims": False}, [(2, 3, 4)]),
    Case("_onnx_reduce", {"fn": "max", "axes": (0, -1), "keepdims": False}, [(2, 3, 4)],
         "float16"),
    Case("_onnx_reduce", {"fn": "min", "axes": (1,)}, [(2, 0, 3)]),
    Case("_onnx_reduce", {"fn": "max", "axes": (0,)}, [(0, 3)], "int8"),
    Case("_onnx_reduce", {"fn": "prod", "axes": (0,)}, [(0, 3)]),
    Case("_onnx_reduce", {"fn": "mean", "noop_with_empty_axes": True}, [(2, 3)]),
    *[case for fn in ("max", "min")
      for case in _each("_onnx_arg", {"fn": fn, "axis": 1}, [(3, 4, 2)])],
    Case("_onnx_arg", {"fn": "max", "axis": -1, "keepdims": False, "select_last_index": True},
         [(3, 5)]),
    Case("_onnx_arg", {"fn": "min", "axis": 0, "select_last_index": True}, [(4, 3)], "float16"),
    *_each("_onnx_cumsum", {"axis": 1}, [(2, 4, 3)]),
    Case("_onnx_cumsum", {"axis": 0, "exclusive": True, "reverse": True}, [(5, 2)]),
    Case("_onnx_cumsum", {"axis": -1, "reverse": True}, [(2, 6)], "float16"),
    Case("_onnx_cumsum", {"axis": 0, "exclusive": True}, [(6,)], "int8"),
    *_each("_onnx_cumprod", {"axis": 1}, [(2, 4, 3)]),
    Case("_onnx_cumprod", {"axis": 0, "exclusive": True, "reverse": True}, [(5, 2)], "float16"),
    *_each("_onnx_topk", {"k": 2}, [(3, 5)]),
    Case("_onnx_topk", {"k": 3, "axis": 0, "largest": False}, [(4, 3)]),
    Case("_onnx_topk", {"k": 0, "axis": 1}, [(2, 3)], "float16"),
    Case("_onnx_topk", {"k": 4, "axis": -1, "largest": False}, [(2, 6)], "int8"),
    *[case for fn in ("softmax", "log_softmax")
      for case in _each("_onnx_softmax", {"fn": fn}, [(2, 3, 4)], _FLOATS)],
    *_each("_onnx_softmax", {"fn": "hardmax", "axis": 1}, [(2, 3, 4)]),
    Case("_onnx_softmax", {"fn": "softmax", "axis": 1, "legacy": True}, [(2, 3, 4)]),
    Case("_onnx_softmax", {"fn": "log_softmax", "axis": 0, "legacy": True}, [(2, 3)]),
    Case("_onnx_softmax", {"fn": "hardmax", "axis": -2, "legacy": True}, [(2, 3, 4)],
         "float16"),
    *_each("_onnx_matmul", {}, [(2, 3, 4), (4, 5)]),
    Case("_onnx_matmul", {}, [(4,), (2, 4, 3)]),
    Case("_onnx_matmul", {}, [(2, 1, 3, 4), (4, 2)], "float16"),
    Case("_onnx_matmul", {}, [(3, 4), (4,)], "int8"),
    Case("_onnx_matmul", {}, [(5,), (5,)]),
    *_each("_onnx_gemm", {"alpha": 0.5, "beta": 2.0}, [(3, 4), (4, 5), (5,)]),
    Case("_onnx_gemm", {"trans_a": True, "trans_b": True}, [(4, 3), (5, 4), (3, 1)]),
    Case("_onnx_gemm", {"has_c": False, "trans_b": True}, [(2, 3), (4, 3)], "float16"),
    Case("_onnx_gemm", {"alpha": 1.5, "has_c": False}, [(2, 3), (3, 2)], "int32"),
    # float32 products through the packed GEMM (gemm.h): batched, broadcast
    # batch axes, vectors, enough work to share out among threads, and Gemm's
    # C as residual, row or column bias, or scaled
    Case("_onnx_matmul", {}, [(2, 4, 17, 16), (2, 4, 16, 17)]),
    Case("_onnx_matmul", {}, [(3, 1, 5, 7), (4, 7, 6)]),
    Case("_onnx_matmul", {}, [(8, 40, 33), (8, 33, 41)]),
    Case("_onnx_matmul", {}, [(70, 90), (90, 65)]),
    Case("_onnx_matmul", {}, [(2, 0, 3), (3, 4)]),
    Case("_onnx_matmul", {}, [(2, 3, 0), (0, 4)]),
    Case("_onnx_gemm", {}, [(5, 6), (6, 7), (5, 7)]),
    Case("_onnx_gemm", {"trans_a": True}, [(6, 5), (6, 7), (5, 1)]),
    Case("_onnx_gemm", {"trans_b": True}, [(5, 6), (7, 6), (1, 7)]),
    Case("_onnx_gemm", {"alpha": 0.5, "beta": -2.0, "trans_a": True, "trans_b": True},
         [(6, 5), (7, 6), (5, 7)]),
    Case("_onnx_gemm", {"beta": 0.0}, [(70, 80), (80, 90), ()]),
    *_each("_onnx_lrn", {"size": 3}, [(2, 5, 3, 3)], _FLOATS),
    Case("_onnx_lrn", {"size": 4, "alpha": 0.01, "beta": 0.5, "bias": 2.0}, [(1, 6, 2)]),
    *_each("_onnx_mvn", {}, [(2, 3, 4, 5)], _FLOATS),
    Case("_onnx_mvn", {"axes": (1,)}, [(3, 6)]),
    *_each("_onnx_norm", {}, [(2, 3, 4), (4,), (4,)], _FLOATS),
    Case("_onnx_norm", {"axis": 1, "eps": 1e-3}, [(2, 3, 4), (3, 4), (4,)]),
    Case("_onnx_norm", {"has_bias": False, "rms": True, "axis": -2}, [(2, 3, 4), (3, 4)]),
    Case("_onnx_norm", {"has_bias": False}, [(3, 5), (5,)], "float16"),
    *_each("_onnx_lp_norm", {}, [(3, 4)], _FLOATS),
    Case("_onnx_lp_norm", {"axis": 0, "p": 1}, [(3, 4)]),
    *_each("_onnx_group_norm", {"num_groups": 2}, [(2, 4, 3), (4,), (4,)], _FLOATS),
    Case("_onnx_group_norm", {"num_groups": 3, "eps": 1e-3}, [(1, 3, 2, 2), (3,), (3,)]),
    *_each("_onnx_det", {}, [(2, 3, 3)], ("float32", "float64")),
    Case("_onnx_det", {}, [(4, 4)]),
    *_each("_onnx_einsum", {"equation": "ij,jk->ik", "num_args": 2}, [(2, 3), (3, 4)],
           ("float32", "float16", "float64", "int8", "int32", "int64", "uint8")),
    Case("_onnx_einsum", {"equation": "bij,bjk", "num_args": 2}, [(2, 3, 4), (2, 4, 2)]),
    Case("_onnx_einsum", {"equation": "ii->i", "num_args": 1}, [(3, 3)]),
    Case("_onnx_einsum", {"equation": "...ij->...ji", "num_args": 1}, [(2, 3, 4)], "float16"),
    Case("_onnx_einsum", {"equation": "i,i", "num_args": 2}, [(5,), (5,)]),
    Case("_onnx_einsum", {"equation": "ij->", "num_args": 1}, [(2, 3)]),
    Case("_onnx_einsum", {"equation": ",->", "num_args": 2}, [(), ()]),
    Case("_onnx_einsum", {"equation": "bik,bjk->bij", "num_args": 2}, [(2, 3, 4), (2, 2, 4)],
         "float16"),
    *[case for reduction in ("none", "sum", "mean")
      for case in _each("_onnx_nll_loss", {"reduction": reduction}, [(3, 5), (3,)], _FLOATS,
                        ("int64",))],
    Case("_onnx_nll_loss", {"ignore_index": 1, "has_weight": True}, [(4, 3, 2), (4, 2), (3,)],
         ("float32", "int32", "float32")),
    *[case for reduction in ("none", "sum", "mean")
      for case in _each("_onnx_softmax_cross_entropy", {"reduction": reduction}, [(3, 5), (3,)],
                        _FLOATS, ("int64",))],
    Case("_onnx_softmax_cross_entropy", {"has_weight": True, "ignore_index": 0},
         [(2, 4, 3), (2, 3), (4,)], ("float32", "int64", "float32")),
    *_each("_onnx_pool", {"kernel": (2, 2), "pool_type": "max"}, [(1, 2, 5, 5)]),
    Case("_onnx_pool", {"kernel": (3, 3), "pool_type": "avg", "stride": (2, 2),
                        "pads": (1, 1, 1, 1), "ceil_mode": True}, [(1, 2, 6, 6)]),
    Case("_onnx_pool", {"kernel": (3, 3), "pool_type": "avg", "stride": (2, 2),
                        "pads": (1, 1, 1, 1), "count_include_pad": True}, [(1, 2, 6, 6)],
         "float16"),
    Case("_onnx_pool", {"kernel": (2,), "pool_type": "lp", "p": 3, "dilate": (2,)}, [(2, 2, 7)]),
    Case("_onnx_pool", {"kernel": (2, 2), "pool_type": "max", "dilate": (2, 1), "stride": (1, 2),
                        "pads": (0, 1, 1, 0), "ceil_mode": True}, [(1, 1, 5, 5)]),
    Case("_onnx_pool", {"kernel": (2, 2, 2), "pool_type": "avg"}, [(1, 1, 3, 3, 3)], "float64"),
    *[Case("_onnx_resize", {"sizes": (1, 1, 5, 7), "scales": (1.0, 1.0, 5 / 3, 7 / 4),
                            "mode": mode, "coordinate_transformation_mode": ct}, [(1, 1, 3, 4)],
           dtype)
      for mode in ("nearest", "linear", "cubic")
      for ct, dtype in (("half_pixel", "float32"), ("align_corners", "float16"),
                        ("asymmetric", "uint8"), ("pytorch_half_pixel", "float64"),
                        ("half_pixel_symmetric", "int32"))],
    *[Case("_onnx_resize", {"sizes": (1, 2, 4, 2), "scales": (1.0, 1.0, 2.0, 0.5),
                            "mode": "nearest", "nearest_mode": nearest}, [(1, 2, 2, 4)])
      for nearest in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")],
    Case("_onnx_resize", {"sizes": (1, 1, 3, 3), "scales": (1.0, 1.0, 0.75, 0.75),
                          "mode": "cubic", "exclude_outside": True, "cubic_coeff_a": -0.5},
         [(1, 1, 4, 4)]),
    Case("_onnx_resize", {"sizes": (1, 1, 3, 3), "scales": (1.0, 1.0, 0.75, 0.75),
                          "mode": "linear",
                          "coordinate_transformation_mode": "tf_crop_and_resize",
                          "roi": (0, 0, 0.4, 0.6, 1, 1, 1.2, 0.8),
                          "extrapolation_value": 10.0}, [(1, 1, 4, 4)]),
    *_each("_onnx_upsample_nearest", {"scales": (1.0, 1.0, 2.0, 3.0)}, [(1, 2, 2, 3)]),
    Case("_onnx_upsample_nearest", {"scales": (1.0, 1.5)}, [(2, 3)]),
]

CASES += ONNX_CASES

# (operator, attributes, input shapes, output shapes) that the host's
# registry rejects: cpu_ref must refuse them too, with a status, never run
# them.
RejectedCase = tuple[str, dict[str, Any], list[tuple[int, ...]], list[tuple[int, ...]]]

REJECTED: list[RejectedCase] = [
    ("Reshape", {"shape": (-1, -1)}, [(2, 3)], [(6, 1)]),
    ("Reshape", {"shape": (5, -1)}, [(2, 3)], [(5, 1)]),
    ("Reshape", {"shape": (-5,)}, [(2, 3)], [(6,)]),
    ("Reshape", {"shape": (-4, 4, -1)}, [(6,)], [(4, 1)]),
    ("Reshape", {"shape": (0, 0, 0)}, [(2, 3)], [(2, 3, 1)]),
    ("Reshape", {}, [(2, 3)], [(6,)]),
    ("transpose", {}, [(1,) * 7], [(1,) * 7]),
    ("transpose", {"axes": (0, 0)}, [(2, 3)], [(2, 2)]),
    ("transpose", {"axes": (1, -1)}, [(2, 3)], [(3, 2)]),
    ("Concat", {"num_args": 2}, [(2, 3), (3, 3)], [(5, 3)]),
    ("Concat", {"num_args": 2, "dim": 2}, [(2, 3), (2, 3)], [(2, 6)]),
    ("SliceChannel", {"num_outputs": 4}, [(2, 6)], [(2, 1)] * 4),
    ("SliceChannel", {"num_outputs": 2, "squeeze_axis": True}, [(2, 4)], [(2,)] * 2),
    ("squeeze", {"axis": (1,)}, [(2, 3)], [(2, 3)]),
    ("squeeze", {"axis": (0, 0)}, [(1, 3)], [(3,)]),
    ("slice_axis", {"axis": 0, "begin": 3, "end": 2}, [(5,)], [(1,)]),
    ("slice_axis", {"axis": 0, "begin": 0, "end": 6}, [(5,)], [(6,)]),
    ("slice_axis", {"axis": 0, "begin": 0}, [(5,)], [(5,)]),
    ("broadcast_add", {}, [(2, 3), (4, 3)], [(4, 3)]),
    ("elemwise_add", {}, [(2, 3), (3, 2)], [(2, 3)]),
    ("batch_dot", {}, [(2, 3, 4), (3, 4, 5)], [(2, 3, 5)]),
    ("batch_dot", {}, [(3, 4), (4, 5)], [(3, 5)]),
    ("dot", {}, [(3, 4), (5, 6)], [(3, 6)]),
    ("dot", {"transpose_a": True}, [(4,), (4,)], [(1,)]),
    ("max", {}, [(0, 3)], [(1,)]),
    ("sum", {"axis": (0, 0)}, [(2, 3)], [(3,)]),
    ("sum", {"axis": (2,)}, [(2, 3)], [(2,)]),
    ("LayerNorm", {}, [(2, 3), (2,), (3,)], [(2, 3)]),
    ("Embedding", {"input_dim": 5, "output_dim": 2}, [(3,), (4, 2)], [(3, 2)]),
    ("LeakyReLU", {"act_type": "prelu"}, [(2, 3), (4,)], [(2, 3)]),
    ("LeakyReLU", {"act_type": "prelu"}, [(3,), (3,)], [(3,)]),
    ("expand_dims", {"axis": 3}, [(2, 3)], [(2, 3, 1)]),
    ("clip", {"a_min": 0}, [(2,)], [(2,)]),
    ("Dropout", {"p": 1.5}, [(2,)], [(2,)]),
    ("add_n", {"num_args": 2}, [(2,), (3,)], [(2,)]),
    ("log_softmax", {"axis": 2}, [(2, 3)], [(2, 3)]),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "adj": (2, 0)},
     [(1, 3, 4, 4), (3, 4, 3, 3)], [(1, 4, 11, 9)]),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "target_shape": (20, 5)},
     [(1, 3, 4, 4), (3, 4, 3, 3)], [(1, 4, 20, 5)]),
    ("Deconvolution", {"kernel": (3, 3), "num_filter": 4, "pad": (3, 0)},
     [(1, 3, 1, 4), (3, 4, 3, 3)], [(1, 4, 1, 6)]),
    ("InstanceNorm", {}, [(2, 3), (3,), (3,)], [(2, 3)]),
    ("UpSampling", {"scale": 2, "sample_type": "nearest", "num_args": 2},
     [(1, 2, 2, 3), (1, 3, 3, 6)], [(1, 5, 4, 6)]),
    ("Pad", {"pad_width": (0, 0, 1, 0, 0, 0, 0, 0)}, [(1, 2, 3, 4)], [(1, 3, 3, 4)]),
    ("Pad", {"mode": "reflect", "pad_width": (0, 0, 0, 0, 3, 0, 0, 0)}, [(1, 2, 3, 4)],
     [(1, 2, 6, 4)]),
    ("Pad", {"pad_width": (0, 0, 0, 0, 1, 1)}, [(1, 2, 3, 4)], [(1, 2, 5, 4)]),
    ("SoftmaxOutput", {}, [(3, 5), (5,)], [(3, 5)]),
    ("SoftmaxActivation", {"mode": "channel"}, [(2, 3)], [(2, 3)]),
    ("Pooling", {"kernel": (2,), "pool_type": "lp"}, [(1, 1, 4)], [(1, 1, 3)]),
    ("Pooling", {"kernel": (2, 2), "pooling_convention": "same"}, [(1, 1, 4, 4)], [(1, 1, 4, 4)]),
    ("Pooling", {"kernel": (2,), "pad": (1,), "pooling_convention": "same"}, [(1, 1, 4)],
     [(1, 1, 4)]),
    ("slice", {"begin": (0,), "end": (0,)}, [(3,)], [(0,)]),
    ("slice", {"begin": (0, 0, 0), "end": (1, 1, 1)}, [(2, 2)], [(1, 1)]),
    ("slice", {"begin": (3,), "end": (1,)}, [(5,)], [(1,)]),
    ("slice", {"begin": (0,), "end": (2,), "step": (0,)}, [(5,)], [(2,)]),
    ("slice_like", {"axes": (1,)}, [(3, 2), (3, 4)], [(3, 4)]),
    ("stack", {"num_args": 2}, [(2, 3), (3, 2)], [(2, 2, 3)]),
    ("tile", {"reps": (0, 2)}, [(2, 3)], [(0, 6)]),
    ("repeat", {"repeats": -1}, [(2,)], [(2,)]),
    ("broadcast_to", {"shape": (3, 4)}, [(2, 4)], [(3, 4)]),
    ("broadcast_axis", {"axis": (0,), "size": (3,)}, [(2, 4)], [(3, 4)]),
    ("broadcast_like", {}, [(2, 3), (4, 3)], [(4, 3)]),
    ("take", {"axis": 2}, [(2, 3), (4,)], [(2, 4)]),
    ("where", {}, [(4,), (3, 4), (3, 4)], [(3, 4)]),
    ("argmax", {"axis": 2}, [(2, 3)], [(2,)]),
    ("topk", {"k": 6}, [(2, 5)], [(2, 6)]),
    ("topk", {"dtype": "uint8"}, [(2, 300)], [(2, 1)]),
    ("Cast", {}, [(2,)], [(2,)]),
]


def case_id(case: Case | tuple[Any, ...]) -> str:
    op, attrs, shapes = case[:3]
    details = ",".join(f"{key}={value}" for key, value in attrs.items())
    dtypes = case[3] if len(case) > 3 else "float32"
    dtype = dtypes if isinstance(dtypes, str) else "-".join(dtypes)
    return f"{op}[{details}]{shapes[0]}:{dtype}"
