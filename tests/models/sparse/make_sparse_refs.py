"""Generate MXNet 1.9.1's reference results for sparse NDArrays.

Run with the side environment that has MXNet (never a project dependency)::

    /work/mxenv/bin/python tests/models/sparse/make_sparse_refs.py

Writes, beside this script:

ops.json, ops.npz
    Every case of CASES run in MXNet: the inputs (dense values and storage
    type), the call (a function of ``mx.nd`` or ``mx.nd.sparse``, or an
    NDArray method or operator, with its keyword arguments) and MXNet's
    output: storage type, dtype, shape, dense value and, for sparse outputs,
    the stored components. tests/nd/test_sparse_ops.py replays the same calls
    on acc_host and compares.
infer_storage.json
    MXNet's storage-type inference (``_infer_storage_type`` of a bound
    executor's graph, read from ``exe.debug_str``-independent
    ``simple_bind`` results) for small symbols with sparse variables.
*.params
    Files written by ``mx.nd.save`` and ``mx.model.save_checkpoint`` holding
    CSR and row_sparse arrays, with ``params_expected.npz`` (their
    components); tests/nd/test_sparse_params.py reads them and checks that
    acc_host writes the same bytes.
"""

from __future__ import annotations

import json
import os
import sys

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# the case runner the tests share (tests/support: plain Python, no acc_host)
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from sparse_cases import run_case  # noqa: E402


def _pattern(rng: np.random.RandomState, shape: tuple, density: float,
             row_density: float = 1.0) -> np.ndarray:
    values = rng.randint(1, 9, size=shape).astype(np.float32) * rng.choice([-1, 1], size=shape)
    mask = rng.rand(*shape) < density
    rows = rng.rand(shape[0]) < row_density
    mask &= rows.reshape((-1,) + (1,) * (len(shape) - 1))
    return (values * mask).astype(np.float32)


def make_inputs() -> dict:
    """name -> (dense value, storage type)."""
    rng = np.random.RandomState(39)
    a = _pattern(rng, (4, 5), 0.45)
    a[1] = 0  # an empty row
    b = _pattern(rng, (4, 5), 0.45)
    r = _pattern(rng, (6, 5), 1.0, 0.5)
    r[[0, 2]] = 0
    r[1] = rng.randint(1, 5, 5)
    r2 = _pattern(rng, (6, 5), 1.0, 0.5)
    r2[[1, 3]] = 0
    r2[2] = rng.randint(1, 5, 5)
    big = _pattern(rng, (20, 30), 0.1)
    return {
        "A": (a, "csr"),
        "B": (b, "csr"),
        "R": (r, "row_sparse"),
        "R2": (r2, "row_sparse"),
        "BIG": (big, "csr"),
        "D": (_pattern(rng, (4, 5), 1.0), "default"),
        "D65": (_pattern(rng, (6, 5), 1.0), "default"),
        "W": (_pattern(rng, (5, 3), 1.0), "default"),
        "W4": (_pattern(rng, (4, 3), 1.0), "default"),
        "WB": (_pattern(rng, (30, 7), 1.0), "default"),
        "WT": (_pattern(rng, (3, 5), 1.0), "default"),
        "L": (_pattern(rng, (3, 4), 1.0), "default"),
        "L5": (_pattern(rng, (3, 5), 1.0), "default"),
        "V": (_pattern(rng, (1, 5), 1.0) + 10, "default"),
        "COL": (_pattern(rng, (4, 1), 1.0) + 10, "default"),
        "RS": (_pattern(rng, (5, 3), 1.0, 0.5), "row_sparse"),
        "IDX": (np.array([0, 1, 3, 5], dtype=np.float32), "default"),
        "TOK": (np.array([[1, 3], [5, 3]], dtype=np.float32), "default"),
        "BIAS": (np.arange(7, dtype=np.float32), "default"),
        "FCW": (_pattern(rng, (7, 30), 1.0), "default"),
    }


#: (case name, kind, target, input names, keyword arguments). kind: "nd"
#: (mx.nd.<target>), "sparse" (mx.nd.sparse.<target>), "method"
#: (first input's method), "op" (a Python operator: add, sub, mul, truediv,
#: neg, with the second operand an input name or a number in kwargs["other"]),
#: "getitem" (kwargs["key"]: an int or [start, stop]).
CASES = [
    ("dot_csr_dns", "sparse", "dot", ["A", "W"], {}),
    ("dot_csr_dns_nd", "nd", "dot", ["A", "W"], {}),
    ("dot_csrT_dns", "sparse", "dot", ["A", "W4"], {"transpose_a": True}),
    ("dot_csr_dnsT", "sparse", "dot", ["A", "WT"], {"transpose_b": True}),
    ("dot_dns_csr", "sparse", "dot", ["L", "A"], {}),
    ("dot_dns_csrT", "sparse", "dot", ["L5", "A"], {"transpose_b": True}),
    ("dot_dns_csr_default", "sparse", "dot", ["L", "A"], {"forward_stype": "default"}),
    ("dot_csr_rsp", "sparse", "dot", ["A", "RS"], {}),
    ("dot_big", "sparse", "dot", ["BIG", "WB"], {}),
    ("elemwise_add_csr_csr", "sparse", "elemwise_add", ["A", "B"], {}),
    ("elemwise_sub_csr_csr", "sparse", "elemwise_sub", ["A", "B"], {}),
    ("elemwise_mul_csr_csr", "sparse", "elemwise_mul", ["A", "B"], {}),
    ("elemwise_sub_csr_same", "sparse", "elemwise_sub", ["A", "A"], {}),
    ("elemwise_sub_rsp_same", "sparse", "elemwise_sub", ["R", "R"], {}),
    ("elemwise_add_rsp_rsp", "sparse", "elemwise_add", ["R", "R2"], {}),
    ("elemwise_sub_rsp_rsp", "sparse", "elemwise_sub", ["R", "R2"], {}),
    ("elemwise_mul_rsp_rsp", "sparse", "elemwise_mul", ["R", "R2"], {}),
    ("elemwise_add_dns_csr", "sparse", "elemwise_add", ["D", "A"], {}),
    ("elemwise_add_csr_dns", "sparse", "elemwise_add", ["A", "D"], {}),
    ("elemwise_sub_csr_dns", "sparse", "elemwise_sub", ["A", "D"], {}),
    ("elemwise_mul_dns_csr", "sparse", "elemwise_mul", ["D", "A"], {}),
    ("elemwise_mul_csr_dns", "sparse", "elemwise_mul", ["A", "D"], {}),
    ("elemwise_add_dns_rsp", "sparse", "elemwise_add", ["D65", "R"], {}),
    ("elemwise_mul_dns_rsp", "sparse", "elemwise_mul", ["D65", "R"], {}),
    ("elemwise_mul_rsp_dns", "sparse", "elemwise_mul", ["R", "D65"], {}),
    ("sparse_add_csr_csr", "sparse", "add", ["A", "B"], {}),
    ("sparse_add_rsp_rsp", "sparse", "add", ["R", "R2"], {}),
    ("sparse_add_dns_csr", "sparse", "add", ["D", "A"], {}),
    ("sparse_subtract_csr_csr", "sparse", "subtract", ["A", "B"], {}),
    ("sparse_multiply_csr_csr", "sparse", "multiply", ["A", "B"], {}),
    ("sparse_multiply_csr_row", "sparse", "multiply", ["A", "V"], {}),
    ("sparse_multiply_csr_col", "sparse", "multiply", ["A", "COL"], {}),
    ("sparse_divide_csr_row", "sparse", "divide", ["A", "V"], {}),
    ("sparse_add_csr_row", "sparse", "add", ["A", "V"], {}),
    ("broadcast_mul_csr_col", "nd", "broadcast_mul", ["A", "COL"], {}),
    ("broadcast_div_csr_row", "nd", "broadcast_div", ["A", "V"], {}),
    ("broadcast_add_csr_row", "nd", "broadcast_add", ["A", "V"], {}),
    ("op_add_csr_csr", "op", "add", ["A", "B"], {}),
    ("op_sub_rsp_rsp", "op", "sub", ["R", "R2"], {}),
    ("op_mul_csr_csr", "op", "mul", ["A", "B"], {}),
    ("op_add_csr_dns", "op", "add", ["A", "D"], {}),
    ("op_mul_csr_scalar", "op", "mul", ["A"], {"other": 2.5}),
    ("op_div_csr_scalar", "op", "truediv", ["A"], {"other": 4.0}),
    ("op_mul_rsp_scalar", "op", "mul", ["R"], {"other": -3.0}),
    ("op_div_rsp_scalar", "op", "truediv", ["R"], {"other": 2.0}),
    ("op_add_csr_scalar", "op", "add", ["A"], {"other": 1.0}),
    ("op_neg_csr", "op", "neg", ["A"], {}),
    ("sum_csr_all", "sparse", "sum", ["A"], {}),
    ("sum_csr_axis0", "sparse", "sum", ["A"], {"axis": 0}),
    ("sum_csr_axis1", "sparse", "sum", ["A"], {"axis": 1}),
    ("sum_csr_axis1_keepdims", "sparse", "sum", ["A"], {"axis": 1, "keepdims": True}),
    ("mean_csr_axis0", "sparse", "mean", ["A"], {"axis": 0}),
    ("mean_csr_axis1", "sparse", "mean", ["A"], {"axis": 1}),
    ("sum_rsp_axis0", "nd", "sum", ["R"], {"axis": 0}),
    ("slice_csr_rows", "nd", "slice", ["A"], {"begin": [1], "end": [3]}),
    ("slice_csr_2d", "sparse", "slice", ["A"], {"begin": [0, 1], "end": [4, 3]}),
    ("getitem_csr_slice", "getitem", "", ["A"], {"key": [1, 4]}),
    ("getitem_csr_int", "getitem", "", ["A"], {"key": 2}),
    ("retain_rsp", "sparse", "retain", ["R", "IDX"], {}),
    ("cast_dns_csr", "nd", "cast_storage", ["D"], {"stype": "csr"}),
    ("cast_dns_rsp", "nd", "cast_storage", ["R"], {"stype": "default"}),
    ("cast_csr_dns", "nd", "cast_storage", ["A"], {"stype": "default"}),
    ("tostype_csr", "method", "tostype", ["D"], {"stype": "csr"}),
    ("tostype_rsp", "method", "tostype", ["D65"], {"stype": "row_sparse"}),
    ("astype_csr", "method", "astype", ["A"], {"dtype": "float64"}),
    ("copy_csr", "method", "copy", ["A"], {}),
    ("fc_csr", "nd", "FullyConnected", ["BIG", "FCW", "BIAS"], {"num_hidden": 7}),
    ("fc_csr_no_bias", "nd", "FullyConnected", ["BIG", "FCW"],
     {"num_hidden": 7, "no_bias": True}),
    ("embedding_rsp_weight", "nd", "Embedding", ["TOK", "R"], {"input_dim": 6, "output_dim": 5}),
    ("exp_csr", "nd", "exp", ["A"], {}),
    ("sigmoid_csr", "nd", "sigmoid", ["A"], {}),
    ("clip_csr", "nd", "clip", ["A"], {"a_min": -2.0, "a_max": 3.0}),
    ("elemwise_div_csr_csr", "sparse", "elemwise_div", ["A", "B"], {}),
    ("elemwise_div_rsp_rsp", "sparse", "elemwise_div", ["R", "R2"], {}),
    ("elemwise_add_csr_rsp", "sparse", "elemwise_add", ["A", "R4"], {}),
    ("broadcast_mul_dns_csr", "nd", "broadcast_mul", ["D", "A"], {}),
    ("op_mul_dns_csr", "op", "mul", ["D", "A"], {}),
    ("op_add_dns_csr", "op", "add", ["D", "A"], {}),
    ("op_rsub_csr_scalar", "op", "rsub", ["A"], {"other": 1.0}),
    ("op_pow_csr_scalar", "op", "pow", ["A"], {"other": 2.0}),
    ("zeros_like_csr", "nd", "zeros_like", ["A"], {}),
    ("zeros_like_rsp", "nd", "zeros_like", ["R"], {}),
    ("ones_like_csr", "nd", "ones_like", ["A"], {}),
    ("cast_op_csr", "nd", "cast", ["A"], {"dtype": "float64"}),
    ("identity_csr", "nd", "identity", ["A"], {}),
    ("stop_gradient_rsp", "nd", "stop_gradient", ["R"], {}),
    ("concat_csr_dim0", "nd", "concat", ["A", "B"], {"dim": 0}),
    ("concat_csr_dim1", "nd", "concat", ["A", "B"], {"dim": 1}),
    ("add_n_csr", "nd", "add_n", ["A", "B"], {}),
    ("add_n_rsp", "nd", "add_n", ["R", "R2"], {}),
    ("add_n_dns_csr", "nd", "add_n", ["D", "A"], {}),
    ("norm_csr", "nd", "norm", ["A"], {}),
    ("transpose_csr", "nd", "transpose", ["A"], {}),
    ("clip_csr_positive", "nd", "clip", ["A"], {"a_min": 1.0, "a_max": 3.0}),
] + [
    (f"{name}_csr", "nd", name, ["A"], {}) for name in
    ["relu", "abs", "sign", "round", "rint", "ceil", "floor", "trunc", "fix", "square",
     "negative", "sin", "tan", "arctan", "sinh", "tanh", "arcsinh", "expm1", "degrees",
     "radians"]
] + [
    (f"{name}_rsp", "nd", name, ["R"], {}) for name in
    ["relu", "abs", "square", "negative", "sign", "tanh"]
] + [
    ("sqrt_csr", "nd", "sqrt", ["BIGABS"], {}),
    ("log1p_csr", "nd", "log1p", ["BIGABS"], {}),
    ("arcsin_csr", "nd", "arcsin", ["SMALL"], {}),
    ("arctanh_csr", "nd", "arctanh", ["SMALL"], {}),
    ("sqrt_rsp", "nd", "sqrt", ["RABS"], {}),
]


#: Constructor calls: (case name, function of mx.nd.sparse, first argument
#: spelled as JSON (see build_argument), keyword arguments). MXNet builds
#: csr_matrix((data, (row, col))) with scipy, which the side environment
#: lacks: that form is tested against numpy only (test_sparse_core.py).
CONSTRUCTORS = [
    ("csr_components", "csr_matrix",
     {"tuple": [[1.5, 2.0, 3.0], [0, 2, 1], [0, 2, 2, 3]]}, {"shape": [3, 4]}),
    ("csr_components_shape_inferred", "csr_matrix",
     {"tuple": [[1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 2, 3]]}, {}),
    ("csr_components_float64", "csr_matrix",
     {"tuple": [[1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 2, 3]]}, {"shape": [3, 4], "dtype": "float64"}),
    ("csr_dense_int64", "csr_matrix",
     {"numpy": [[0, 5, 0], [7, 0, 0]], "dtype": "int64"}, {}),
    ("csr_dense_float32", "csr_matrix",
     {"numpy": [[0, 5, 0], [7, 0, 0]], "dtype": "float32"}, {}),
    ("csr_shape_only", "csr_matrix", {"shape": [2, 5]}, {}),
    ("rsp_components", "row_sparse_array",
     {"tuple2": [[[1.0, 2.0], [3.0, 4.0]], [1, 3]]}, {"shape": [5, 2]}),
    ("rsp_components_shape_inferred", "row_sparse_array",
     {"tuple2": [[[1.0, 2.0], [3.0, 4.0]], [1, 3]]}, {}),
    ("rsp_dense", "row_sparse_array",
     {"numpy": [[0, 0], [1, 0], [0, 0], [0, 2]], "dtype": "float32"}, {}),
    ("rsp_shape_only", "row_sparse_array", {"shape": [3, 2, 2]}, {"dtype": "float16"}),
    ("zeros_csr_int32", "zeros", {"stype": "csr"}, {"shape": [2, 3], "dtype": "int32"}),
    ("zeros_rsp", "zeros", {"stype": "row_sparse"}, {"shape": [4, 3]}),
]


def build_argument(spec: dict):
    """The first argument of a constructor call from its JSON spelling."""
    if "tuple" in spec:
        data, indices, indptr = spec["tuple"]
        return (data, indices, indptr)
    if "tuple2" in spec:
        data, indices = spec["tuple2"]
        return (data, indices)
    if "numpy" in spec:
        return np.array(spec["numpy"], dtype=spec["dtype"])
    if "shape" in spec:
        return tuple(spec["shape"])
    return spec["stype"]


def make_constructors(arrays: dict, manifest: dict) -> None:
    for name, target, spec, kwargs in CONSTRUCTORS:
        call = {key: tuple(value) if key == "shape" else value for key, value in kwargs.items()}
        result = getattr(mx.nd.sparse, target)(build_argument(spec), **call)
        manifest["constructors"].append({
            "name": name, "target": target, "spec": spec, "kwargs": kwargs,
            "stype": result.stype, "dtype": np.dtype(result.dtype).name,
            "shape": list(result.shape)})
        arrays[f"ctor/{name}/dense"] = result.asnumpy()
        for key, value in components(result).items():
            arrays[f"ctor/{name}/{key}"] = value
            manifest["constructors"][-1][f"{key}_dtype"] = value.dtype.name


def to_mx(value: np.ndarray, stype: str) -> mx.nd.NDArray:
    dense = mx.nd.array(value, dtype=value.dtype)
    return dense if stype == "default" else dense.tostype(stype)


def components(array: mx.nd.NDArray) -> dict:
    """The stored components of an MXNet array, as numpy. MXNet may
    allocate more CSR entries than it stores (csr + csr allocates nnz(a) +
    nnz(b)): only the first indptr[-1] are kept."""
    if array.stype == "csr":
        indptr = array.indptr.asnumpy()
        nnz = int(indptr[-1])
        return {"data": array.data.asnumpy()[:nnz], "indices": array.indices.asnumpy()[:nnz],
                "indptr": indptr}
    if array.stype == "row_sparse":
        return {"data": array.data.asnumpy(), "indices": array.indices.asnumpy()}
    return {}


def make_ops() -> None:
    inputs = make_inputs()
    inputs["BIGABS"] = (np.abs(inputs["BIG"][0]), "csr")
    inputs["SMALL"] = (inputs["A"][0] / 10, "csr")
    inputs["RABS"] = (np.abs(inputs["R"][0]), "row_sparse")
    inputs["R4"] = (inputs["B"][0], "row_sparse")
    arrays: dict[str, np.ndarray] = {}
    manifest: dict = {"inputs": {}, "cases": [], "constructors": []}
    for name, (value, stype) in inputs.items():
        arrays[f"in/{name}"] = value
        manifest["inputs"][name] = stype
    for name, kind, target, input_names, kwargs in CASES:
        args = [to_mx(*inputs[input_name]) for input_name in input_names]
        case = {"name": name, "kind": kind, "target": target, "inputs": input_names,
                "kwargs": kwargs}
        try:
            result = run_case(mx, kind, target, args, kwargs)
            result.wait_to_read()
        except mx.base.MXNetError as error:
            lines = [line for line in str(error).splitlines() if "Check failed" in line
                     or "Error" in line]
            case["error"] = (lines or [str(error)])[-1].strip()[:300]
            manifest["cases"].append(case)
            continue
        case.update(stype=result.stype, dtype=np.dtype(result.dtype).name,
                    shape=list(result.shape))
        arrays[f"out/{name}/dense"] = result.asnumpy()
        for key, value in components(result).items():
            arrays[f"out/{name}/{key}"] = value
        manifest["cases"].append(case)
    make_constructors(arrays, manifest)
    np.savez_compressed(os.path.join(HERE, "ops.npz"), **arrays)
    with open(os.path.join(HERE, "ops.json"), "w") as handle:
        json.dump(manifest, handle, indent=1)
        handle.write("\n")


#: (case name, symbol JSON builder, variable shapes, variable storage types):
#: MXNet's inferred storage types of the outputs of simple_bind.
def _storage_symbols() -> list:
    sym = mx.sym
    x = sym.Variable("x")
    y = sym.Variable("y")
    w = sym.Variable("w")
    tok = sym.Variable("tok")
    return [
        ("dot_csr_dns", sym.dot(x, w), {"x": (4, 5), "w": (5, 3)}, {"x": "csr"}),
        ("dot_csrT_dns", sym.dot(x, w, transpose_a=True), {"x": (4, 5), "w": (4, 3)},
         {"x": "csr"}),
        ("dot_dns_csr", sym.dot(w, x), {"x": (4, 5), "w": (3, 4)}, {"x": "csr"}),
        ("dot_csr_rsp", sym.dot(x, w), {"x": (4, 5), "w": (5, 3)},
         {"x": "csr", "w": "row_sparse"}),
        ("fc_csr", sym.FullyConnected(x, num_hidden=3, name="fc"), {"x": (4, 5)}, {"x": "csr"}),
        ("embedding_rsp", sym.Embedding(tok, w, input_dim=6, output_dim=3),
         {"tok": (2, 2), "w": (6, 3)}, {"w": "row_sparse"}),
        ("add_csr_csr", sym.elemwise_add(x, y), {"x": (4, 5), "y": (4, 5)},
         {"x": "csr", "y": "csr"}),
        ("add_rsp_rsp", sym.elemwise_add(x, y), {"x": (4, 5), "y": (4, 5)},
         {"x": "row_sparse", "y": "row_sparse"}),
        ("add_csr_dns", sym.elemwise_add(x, y), {"x": (4, 5), "y": (4, 5)}, {"x": "csr"}),
        ("sub_rsp_rsp", sym.elemwise_sub(x, y), {"x": (4, 5), "y": (4, 5)},
         {"x": "row_sparse", "y": "row_sparse"}),
        ("mul_dns_csr", sym.elemwise_mul(y, x), {"x": (4, 5), "y": (4, 5)}, {"x": "csr"}),
        ("mul_rsp_dns", sym.elemwise_mul(x, y), {"x": (4, 5), "y": (4, 5)},
         {"x": "row_sparse"}),
        ("broadcast_mul_csr", sym.broadcast_mul(x, y), {"x": (4, 5), "y": (4, 1)},
         {"x": "csr"}),
        ("broadcast_add_csr", sym.broadcast_add(x, y), {"x": (4, 5), "y": (1, 5)},
         {"x": "csr"}),
        ("cast_storage_csr", sym.cast_storage(x, stype="csr"), {"x": (4, 5)}, {}),
        ("cast_storage_rsp_dns", sym.cast_storage(x, stype="default"), {"x": (4, 5)},
         {"x": "row_sparse"}),
        ("sum_csr", sym.sum(x, axis=0), {"x": (4, 5)}, {"x": "csr"}),
        ("relu_csr", sym.relu(x), {"x": (4, 5)}, {"x": "csr"}),
        ("sqrt_rsp", sym.sqrt(x), {"x": (4, 5)}, {"x": "row_sparse"}),
        ("exp_csr", sym.exp(x), {"x": (4, 5)}, {"x": "csr"}),
        ("activation_relu_csr", sym.Activation(x, act_type="relu"), {"x": (4, 5)},
         {"x": "csr"}),
        ("mul_scalar_csr", x * 2, {"x": (4, 5)}, {"x": "csr"}),
        ("plus_scalar_csr", x + 2, {"x": (4, 5)}, {"x": "csr"}),
        ("slice_csr", sym.slice(x, begin=(1,), end=(3,)), {"x": (4, 5)}, {"x": "csr"}),
        ("zeros_like_rsp", sym.zeros_like(x), {"x": (4, 5)}, {"x": "row_sparse"}),
        ("concat_csr_dim0", sym.concat(x, y, dim=0), {"x": (4, 5), "y": (2, 5)},
         {"x": "csr", "y": "csr"}),
        ("concat_csr_dim1", sym.concat(x, y, dim=1), {"x": (4, 5), "y": (4, 2)},
         {"x": "csr", "y": "csr"}),
        ("add_n_rsp", sym.add_n(x, y), {"x": (4, 5), "y": (4, 5)},
         {"x": "row_sparse", "y": "row_sparse"}),
        ("add_n_csr", sym.add_n(x, y), {"x": (4, 5), "y": (4, 5)}, {"x": "csr", "y": "csr"}),
        ("chain_dotT_relu", sym.relu(sym.dot(x, w, transpose_a=True)),
         {"x": (4, 5), "w": (4, 3)}, {"x": "csr"}),
        ("wide_deep", sym.Group([
            sym.FullyConnected(x, num_hidden=2, name="wide"),
            sym.Embedding(tok, w, input_dim=6, output_dim=3, name="deep")]),
         {"x": (4, 5), "tok": (4, 2), "w": (6, 3)}, {"x": "csr", "w": "row_sparse"}),
        ("vars_in_json", sym.dot(sym.Variable("a", stype="csr"), sym.Variable("b")),
         {"a": (4, 5), "b": (5, 3)}, {}),
    ]


def make_storage() -> None:
    cases = []
    for name, symbol, shapes, stypes in _storage_symbols():
        case = {"name": name, "symbol": json.loads(symbol.tojson()),
                "shapes": {key: list(value) for key, value in shapes.items()},
                "stypes": stypes}
        # MXNet infers no storage type for an argument without one: the
        # others are given as default, except those the JSON marks.
        given = {arg: stypes.get(arg, "default") for arg in symbol.list_arguments()
                 if arg in stypes or "__storage_type__" not in (symbol.attr_dict().get(arg) or {})}
        try:
            exe = symbol.simple_bind(mx.cpu(), grad_req="null", stype_dict=given, **shapes)
            case["outputs"] = [array.stype for array in exe.outputs]
        except mx.base.MXNetError as error:
            case["error"] = str(error).splitlines()[0][:300]
        cases.append(case)
    with open(os.path.join(HERE, "infer_storage.json"), "w") as handle:
        json.dump(cases, handle, indent=1)
        handle.write("\n")


def make_params() -> None:
    """.params files with sparse arrays, and their components."""
    rng = np.random.RandomState(7)
    dense = _pattern(rng, (5, 6), 0.4)
    csr = mx.nd.array(dense).tostype("csr")
    rsp = mx.nd.array(_pattern(rng, (6, 4), 1.0, 0.5)).tostype("row_sparse")
    rsp3 = mx.nd.array(_pattern(rng, (4, 2, 3), 1.0, 0.5)).tostype("row_sparse")
    csr64 = mx.nd.array(_pattern(rng, (3, 7), 0.3), dtype="float64").tostype("csr")
    csr_int = mx.nd.array(_pattern(rng, (3, 4), 0.5), dtype="int32").tostype("csr")
    csr_zero = mx.nd.sparse.zeros("csr", (3, 4))
    rsp_zero = mx.nd.sparse.zeros("row_sparse", (3, 4))
    plain = mx.nd.array(_pattern(rng, (2, 3), 1.0))
    listed = [csr, rsp, plain, csr_zero, rsp_zero, rsp3, csr64, csr_int]
    mx.nd.save(os.path.join(HERE, "sparse_list.params"), listed)
    named = {"x_csr": csr, "w_rsp": rsp, "b_dense": plain}
    mx.nd.save(os.path.join(HERE, "sparse_dict.params"), named)
    data = mx.sym.Variable("data", stype="csr")
    tok = mx.sym.Variable("tok")
    embed_weight = mx.sym.Variable("embed_weight", stype="row_sparse")
    wide = mx.sym.FullyConnected(data, num_hidden=2, name="wide")
    deep = mx.sym.Embedding(tok, embed_weight, input_dim=6, output_dim=4, name="embed")
    net = mx.sym.Group([wide, deep])
    arg_params = {"wide_weight": mx.nd.array(_pattern(rng, (2, 6), 1.0)),
                  "wide_bias": mx.nd.array([0.5, -0.5]), "embed_weight": rsp}
    mx.model.save_checkpoint(os.path.join(HERE, "sparse_ckpt"), 0, net, arg_params, {})
    expected = {}
    for prefix, arrays in (("list", dict(enumerate(listed))), ("dict", named)):
        for key, array in arrays.items():
            expected[f"{prefix}/{key}/stype"] = np.array(array.stype)
            expected[f"{prefix}/{key}/dense"] = array.asnumpy()
            for part, value in components(array).items():
                expected[f"{prefix}/{key}/{part}"] = value
    np.savez_compressed(os.path.join(HERE, "params_expected.npz"), **expected)


if __name__ == "__main__":
    make_ops()
    make_storage()
    make_params()
