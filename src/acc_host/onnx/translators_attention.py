"""ONNX Attention and RotaryEmbedding -> the host operators of
:mod:`acc_host.ops.onnx_attention` (registered into TRANSLATORS on import)."""

from __future__ import annotations

from .translators import Unsupported, _host_dtype, _input, _np_dtype_name, onnx_op


@onnx_op("Attention", since=23)
def _attention(cx, node, attrs, inputs, opset):
    mask, past_key, past_value = _input(inputs, 3), _input(inputs, 4), _input(inputs, 5)
    nonpad = _input(inputs, 6)
    if (past_key is None) != (past_value is None):
        raise Unsupported("Attention: past_key and past_value must be given together")
    if nonpad is not None and past_key is not None:
        raise Unsupported("Attention: nonpad_kv_seqlen cannot be combined with past_key")
    dtype = cx.dtype(inputs[0])
    if dtype is not None:
        _np_dtype_name(dtype)  # Unsupported for bfloat16 and the float8 types
    precision = attrs.get("softmax_precision")
    args = [cx.sym(name) for name in inputs[:3]]
    args += [cx.sym(name) for name in (mask, past_key, past_value, nonpad) if name]
    result = cx.op("_onnx_attention", *args,
                   scale=attrs.get("scale"), is_causal=bool(attrs.get("is_causal", 0)),
                   q_num_heads=attrs.get("q_num_heads", 0),
                   kv_num_heads=attrs.get("kv_num_heads", 0),
                   softcap=attrs.get("softcap", 0.0),
                   qk_matmul_output_mode=attrs.get("qk_matmul_output_mode", 0),
                   softmax_precision=None if precision is None else _host_dtype(precision),
                   left_window_size=attrs.get("left_window_size", -1),
                   right_window_size=attrs.get("right_window_size", -1),
                   has_mask=mask is not None, has_past=past_key is not None,
                   has_nonpad=nonpad is not None)
    return [result[i] for i in range(len(node.output))]


@onnx_op("RotaryEmbedding", since=23)
def _rotary_embedding(cx, node, attrs, inputs, opset):
    ids = _input(inputs, 3)
    args = [cx.sym(name) for name in inputs[:3]] + ([cx.sym(ids)] if ids else [])
    return [cx.op("_onnx_rotary_embedding", *args,
                  interleaved=bool(attrs.get("interleaved", 0)),
                  num_heads=attrs.get("num_heads", 0),
                  rotary_embedding_dim=attrs.get("rotary_embedding_dim", 0),
                  has_position_ids=ids is not None)]
