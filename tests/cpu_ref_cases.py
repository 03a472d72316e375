"""Operator cases for cpu_ref: (operator, attributes, input shapes, input
dtypes).

The float32 cases come first, written out; float16 variants of them (one
per operator at least) and integer variants of the operators that take
integers follow, generated from them. Every operator cpu_ref lists has a
float32 and a float16 case (tests/test_cpu_ref_ops.py checks)."""

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
