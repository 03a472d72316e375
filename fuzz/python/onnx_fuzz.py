"""Fuzz target: the ONNX importer (mx.onnx.import_model).

Two kinds of input, told apart by the first byte:

* 0x08 (the tag of ModelProto's first field, ir_version, which every
  serialized model starts with): the bytes are a serialized model, given to
  import_model as they are. Byte-level mutations of the seeds
  (fuzz/corpus/onnx/*.onnx) exercise the protobuf decoding and everything
  after it.
* anything else: a recipe. The first byte picks a seed model, the following
  bytes drive structural mutations of it (operator types, attributes,
  inputs, shapes, element types, initializers, opsets; nodes deleted,
  duplicated or added): malformed models that still decode, which reach the
  importer's translators and its constant folding.

Allowed outcomes: (sym, arg_params, aux_params) with listable arguments and
outputs, or an acc_host.errors.AccHostError (UnsupportedOnnxOperatorError
for what the importer does not translate, ModelFileError for bytes that are
not a model, OperatorError for a malformed node). Everything else is a bug
(harness.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

with harness.instrumented():
    import onnx
    from onnx import TensorProto, helper

    import acc_host as mx
    from acc_host.errors import AccHostError

SEED_DIR = Path(__file__).resolve().parent.parent / "corpus" / "onnx"
SEEDS = [p.read_bytes() for p in sorted(SEED_DIR.glob("*.onnx"))]
OPS = sorted(mx.onnx.supported_operators()) + ["NoSuchOp"]
ATTRS = ["axis", "axes", "perm", "kernel_shape", "pads", "strides", "dilations", "group",
         "alpha", "beta", "epsilon", "keepdims", "shape", "to", "value", "mode", "transA",
         "transB", "split", "starts", "ends", "allowzero", "auto_pad", "ceil_mode",
         "count_include_pad", "storage_order", "momentum", "spatial", "batch_dims", "blocksize",
         "direction", "noop_with_empty_axes", "select_last_index", "exclusive", "reverse",
         "largest", "sorted", "k", "output_padding", "output_shape", "scale", "bias", "lambd",
         "coordinate_transformation_mode", "nearest_mode", "min", "max", "value_float",
         "value_ints", "value_int", "sparse_value"]
INTS = [0, 1, 2, 3, -1, -2, 4, 7, 64, 1000, 2**31 - 1, -(2**31), 2**32, 2**40, 2**62, -(2**63)]
FLOATS = [0.0, 1.0, -1.0, 0.5, 1e-5, 1e30, -1e30, float("inf"), float("-inf"), float("nan")]
STRINGS = ["", "SAME_UPPER", "VALID", "NOTSET", "constant", "reflect", "edge", "nearest",
           "linear", "DCR", "CRD", "tanh", "relu", "\x00", "\u00e9"]


class Recipe:
    """Reads choices from bytes; past the end every choice is 0."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        value = self.data[self.pos] if self.pos < len(self.data) else 0
        self.pos += 1
        return value

    def more(self) -> bool:
        return self.pos < len(self.data)

    def below(self, count: int) -> int:
        if count <= 1:
            return 0
        value = self.byte() | (self.byte() << 8 if count > 256 else 0)
        return value % count

    def pick(self, items):
        return items[self.below(len(items))]

    def int_(self) -> int:
        return self.pick(INTS) if self.byte() & 1 else self.byte() - 128

    def ints(self) -> list[int]:
        return [self.int_() for _ in range(self.below(6))]

    def shape(self) -> list[int]:
        return [self.pick([0, 1, 2, 3, 4, -1, 2**31, 2**40]) for _ in range(self.below(7))]


def _tensor(r: Recipe) -> TensorProto:
    dtype = r.pick([TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL,
                    TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.UINT8,
                    TensorProto.STRING, r.below(40)])
    tensor = TensorProto(name="t", data_type=dtype)
    tensor.dims.extend(r.shape())
    count = r.below(9)
    how = r.below(3)
    if how == 0:
        tensor.raw_data = bytes(r.byte() for _ in range(count * 4))
    elif how == 1:
        tensor.int64_data.extend(r.int_() for _ in range(count))
    else:
        tensor.float_data.extend(r.pick(FLOATS) for _ in range(count))
    return tensor


def _attribute(r: Recipe, name: str) -> onnx.AttributeProto:
    kind = r.below(6)
    if kind == 0:
        return helper.make_attribute(name, r.int_())
    if kind == 1:
        return helper.make_attribute(name, r.ints() or [r.int_()])
    if kind == 2:
        return helper.make_attribute(name, r.pick(FLOATS))
    if kind == 3:
        return helper.make_attribute(name, r.pick(STRINGS))
    if kind == 4:
        return helper.make_attribute(name, _tensor(r))
    return helper.make_attribute(name, [r.pick(FLOATS) for _ in range(1 + r.below(4))])


def _values(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    names = [v.name for v in graph.input] + [t.name for t in graph.initializer]
    names += [out for node in graph.node for out in node.output]
    return names + ["", "missing"]


def _mutate(model: onnx.ModelProto, r: Recipe) -> None:
    graph = model.graph
    kind = r.below(14)
    nodes = graph.node
    node = nodes[r.below(len(nodes))] if len(nodes) else None
    if kind == 0 and node is not None:
        node.op_type = r.pick(OPS)
    elif kind == 1 and node is not None:
        name = r.pick(ATTRS)
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept + [_attribute(r, name)])
    elif kind == 2 and node is not None and len(node.input):
        node.input[r.below(len(node.input))] = r.pick(_values(model))
    elif kind == 3 and node is not None:
        node.input.append(r.pick(_values(model)))
    elif kind == 4 and len(graph.input):
        dims = graph.input[r.below(len(graph.input))].type.tensor_type.shape.dim
        if len(dims) and r.byte() & 1:
            dim = dims[r.below(len(dims))]
            if r.byte() & 3:
                dim.dim_value = max(r.int_(), 0)
            else:
                dim.dim_param = "n"
        else:
            dims.add().dim_value = 1 + r.below(4)
    elif kind == 5 and len(graph.input):
        graph.input[r.below(len(graph.input))].type.tensor_type.elem_type = r.below(24)
    elif kind == 6 and len(graph.initializer):
        init = graph.initializer[r.below(len(graph.initializer))]
        what = r.below(4)
        if what == 0:
            del init.dims[:]
            init.dims.extend(r.shape())
        elif what == 1:
            init.data_type = r.below(24)
        elif what == 2:
            init.raw_data = init.raw_data[:r.below(len(init.raw_data) + 1)]
        else:
            name = init.name
            init.CopyFrom(_tensor(r))
            init.name = name
    elif kind == 7:
        model.opset_import[0].version = r.below(30)
    elif kind == 8 and node is not None:
        nodes.remove(node)
    elif kind == 9 and node is not None:
        nodes.insert(r.below(len(nodes) + 1), node)
    elif kind == 10:
        values = _values(model)
        new = helper.make_node(r.pick(OPS), [r.pick(values) for _ in range(1 + r.below(3))],
                               [f"n{len(nodes)}"])
        nodes.insert(r.below(len(nodes) + 1), new)
        if r.byte() & 1:
            graph.output.add().name = new.output[0]
    elif kind == 11 and len(graph.output):
        graph.output[r.below(len(graph.output))].name = r.pick(_values(model))
    elif kind == 12:
        const = helper.make_node("Constant", [], [f"c{len(nodes)}"],
                                 value=_tensor(r) if r.byte() & 1 else None)
        if not r.byte() & 1:
            del const.attribute[:]
            const.attribute.append(_attribute(r, r.pick(["value", "value_float", "value_ints",
                                                         "value_int", "sparse_value"])))
        nodes.insert(r.below(len(nodes) + 1), const)
    elif node is not None:
        if r.byte() & 1:
            node.output.append(f"extra{len(nodes)}")
        elif len(node.output):
            node.output.pop()


def model_from_recipe(data: bytes) -> onnx.ModelProto:
    r = Recipe(data)
    model = onnx.load_from_string(SEEDS[r.byte() % len(SEEDS)])
    for _ in range(64):
        if not r.more():
            break
        _mutate(model, r)
    return model


def check(data: bytes) -> None:
    if not data:
        return
    model = data if data[0] == 0x08 else model_from_recipe(data)
    try:
        sym, arg_params, aux_params = mx.onnx.import_model(model)
    except AccHostError:
        return
    except Exception as error:
        if harness.known_open(error):
            return
        raise
    sym.list_arguments()
    sym.list_outputs()
    assert all(isinstance(v, mx.nd.NDArray) for v in [*arg_params.values(),
                                                       *aux_params.values()])


if __name__ == "__main__":
    sys.exit(harness.main(check))
