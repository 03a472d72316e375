"""ONNX Attention, RotaryEmbedding and LinearAttention -> the host operators
of :mod:`acc_host.ops.onnx_attention` and :mod:`acc_host.ops.onnx_linear_attention`
(registered into TRANSLATORS on import)."""

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


@onnx_op("LinearAttention", since=27)
def _linear_attention(cx, node, attrs, inputs, opset):
    optional = [_input(inputs, index) for index in (3, 4, 5)]
    rule = attrs.get("update_rule", "gated_delta")
    if isinstance(rule, bytes):
        rule = rule.decode()
    if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
        raise Unsupported("LinearAttention needs q_num_heads and kv_num_heads")
    args = [cx.sym(name) for name in inputs[:3]] + [cx.sym(name) for name in optional if name]
    result = cx.op("_onnx_linear_attention", *args, q_num_heads=attrs["q_num_heads"],
                   kv_num_heads=attrs["kv_num_heads"], scale=attrs.get("scale") or None,
                   update_rule=rule, has_past_state=optional[0] is not None,
                   has_decay=optional[1] is not None, has_beta=optional[2] is not None)
    return [result[i] for i in range(len(node.output))]
