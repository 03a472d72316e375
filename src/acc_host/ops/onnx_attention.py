"""Host operators for ONNX's transformer building blocks: Attention (opset
23+), RotaryEmbedding (opset 23+) and SwiGLU.

Both run on the CPU path only: no plugin's supportedOps names them, so the
partitioner leaves them on the host (like ``_onnx_nonzero``). Their numpy
implementations follow the ONNX operator specification: scaled dot-product
attention with grouped-query heads, additive or boolean masks, causal and
sliding-window masks aligned to the end of a key/value cache, softcap, the
qk_matmul_output modes; rotary position embeddings, half-split or
interleaved, on a leading part of each head.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError, OperatorError, ShapeError
from .params import Attrs, Param, optional, parse_bool, parse_float, parse_int
from .registry import OpDef, ShapeUnknownError, register

# ---- Attention -----------------------------------------------------------------------------

_ATTENTION = "_onnx_attention"


def _attention_arguments(attrs: Attrs) -> list[str]:
    names = ["query", "key", "value"]
    if attrs.has_mask:
        names.append("attn_mask")
    if attrs.has_past:
        names += ["past_key", "past_value"]
    if attrs.has_nonpad:
        names.append("nonpad_kv_seqlen")
    return names


def _split_inputs(attrs: Attrs, inputs: list) -> dict[str, Any]:
    names = _attention_arguments(attrs)
    if len(inputs) != len(names):
        raise OperatorError(f"{_ATTENTION}: {len(inputs)} inputs, expected {len(names)} "
                            f"({', '.join(names)})")
    return dict(zip(names, inputs))


def _heads(attrs: Attrs, shapes: dict[str, Any]) -> tuple[int, int, int, int, int, int, int]:
    """(batch, q heads, kv heads, q length, kv length (new), head size, v head
    size) from the input shapes, checked; a ShapeError naming the input."""
    q, k, v = shapes["query"], shapes["key"], shapes["value"]
    rank = len(q)
    if rank not in (3, 4) or len(k) != rank or len(v) != rank:
        raise ShapeError(f"{_ATTENTION}: query, key and value must all be 3-D or all 4-D, "
                         f"got shapes {tuple(q)}, {tuple(k)}, {tuple(v)}")
    if rank == 3:
        if attrs.q_num_heads <= 0 or attrs.kv_num_heads <= 0:
            raise OperatorError(f"{_ATTENTION}: 3-D inputs need q_num_heads and kv_num_heads "
                                f"(got {attrs.q_num_heads} and {attrs.kv_num_heads})")
        hq, hkv = attrs.q_num_heads, attrs.kv_num_heads
        for what, shape, heads in (("query", q, hq), ("key", k, hkv), ("value", v, hkv)):
            if shape[2] % heads:
                raise ShapeError(f"{_ATTENTION}: {what}'s hidden size {shape[2]} is not a "
                                 f"multiple of its {heads} heads")
        batch, q_len, kv_len = q[0], q[1], k[1]
        head, v_head = q[2] // hq, v[2] // hkv
        if k[2] // hkv != head:
            raise ShapeError(f"{_ATTENTION}: key head size {k[2] // hkv} differs from the "
                             f"query's {head}")
    else:
        batch, hq, q_len, head = q
        hkv, kv_len = k[1], k[2]
        v_head = v[3]
        if k[3] != head:
            raise ShapeError(f"{_ATTENTION}: key head size {k[3]} differs from the query's "
                             f"{head}")
        if v[1] != hkv or v[2] != kv_len:
            raise ShapeError(f"{_ATTENTION}: value shape {tuple(v)} does not match key shape "
                             f"{tuple(k)}")
    if k[0] != batch or v[0] != batch:
        raise ShapeError(f"{_ATTENTION}: batch sizes differ: query {batch}, key {k[0]}, "
                         f"value {v[0]}")
    if hkv <= 0 or hq % hkv:
        raise ShapeError(f"{_ATTENTION}: {hq} query heads are not a multiple of {hkv} "
                         "key/value heads")
    if rank == 3 and (v[1] != kv_len):
        raise ShapeError(f"{_ATTENTION}: value length {v[1]} differs from key length {kv_len}")
    return batch, hq, hkv, q_len, kv_len, head, v_head


def _past_length(shapes: dict[str, Any], batch: int, hkv: int, head: int, v_head: int) -> int:
    if "past_key" not in shapes:
        return 0
    pk, pv = shapes["past_key"], shapes["past_value"]
    if len(pk) != 4 or tuple(pk[:2]) != (batch, hkv) or pk[3] != head:
        raise ShapeError(f"{_ATTENTION}: past_key has shape {tuple(pk)}, expected "
                         f"({batch}, {hkv}, past, {head})")
    if len(pv) != 4 or tuple(pv[:3]) != tuple(pk[:3]) or pv[3] != v_head:
        raise ShapeError(f"{_ATTENTION}: past_value has shape {tuple(pv)}, expected "
                         f"({batch}, {hkv}, {pk[2]}, {v_head})")
    return int(pk[2])


def _attention_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    for position, shape in enumerate(shapes):
        if shape is None:
            raise ShapeUnknownError(f"{_ATTENTION}: the shape of input {position} is unknown")
    named = _split_inputs(attrs, shapes)
    batch, hq, hkv, q_len, kv_len, head, v_head = _heads(attrs, named)
    total = _past_length(named, batch, hkv, head, v_head) + kv_len
    if "attn_mask" in named:
        mask = named["attn_mask"]
        if len(mask) < 1 or len(mask) > 4 or mask[-1] > total:
            raise ShapeError(f"{_ATTENTION}: attn_mask shape {tuple(mask)} does not fit "
                             f"({batch}, {hq}, {q_len}, {total})")
    if "nonpad_kv_seqlen" in named and tuple(named["nonpad_kv_seqlen"]) != (batch,):
        raise ShapeError(f"{_ATTENTION}: nonpad_kv_seqlen has shape "
                         f"{tuple(named['nonpad_kv_seqlen'])}, expected ({batch},)")
    out: tuple[int, ...]
    if len(named["query"]) == 3:
        out = (batch, q_len, hq * v_head)
    else:
        out = (batch, hq, q_len, v_head)
    return list(shapes), [out, (batch, hkv, total, head), (batch, hkv, total, v_head),
                          (batch, hq, q_len, total)]


def _attention_type(attrs: Attrs, dtypes: list) -> tuple[list, list]:
    q = dtypes[0]
    if q is None:
        raise ShapeUnknownError(f"{_ATTENTION}: the dtype of the query is unknown")
    if np.dtype(q).kind != "f":
        raise DTypeError(f"{_ATTENTION}: query must be a float tensor, got {np.dtype(q).name}")
    return list(dtypes), [np.dtype(q)] * 4


def _to_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(batch, length, heads * size) -> (batch, heads, length, size)."""
    batch, length, hidden = x.shape
    return x.reshape(batch, length, heads, hidden // heads).transpose(0, 2, 1, 3)


def _offset_mask(q_len: int, kv_len: int, offset: Any, left: int, right: int,
                 causal: bool) -> np.ndarray:
    """Which keys each query may attend to, for a query at in-block index i
    sitting at absolute position i + offset (offset a scalar or per batch):
    causal keeps j <= i + offset, the window i + offset - left <= j <= i +
    offset + right (a negative bound: unbounded). Shape (q, kv) or (batch,
    1, q, kv)."""
    i = np.arange(q_len).reshape(q_len, 1)
    j = np.arange(kv_len).reshape(1, kv_len)
    per_batch = np.ndim(offset) > 0
    position = i + (np.reshape(offset, (-1, 1, 1)) if per_batch else int(offset))
    allowed: np.ndarray = np.ones(np.broadcast_shapes(np.shape(position), j.shape), dtype=bool)
    if causal:
        allowed &= j <= position
    if left >= 0:
        allowed &= position - j <= left
    if right >= 0:
        allowed &= j - position <= right
    if per_batch:
        return allowed.reshape(allowed.shape[0], 1, q_len, kv_len)
    return allowed


def _attention_bias(attrs: Attrs, named: dict[str, np.ndarray], dtype: np.dtype, batch: int,
                    q_len: int, kv_len: int, past: int) -> np.ndarray:
    """The additive bias (0 where attended, -inf where masked, or the float
    mask's values) of shape broadcastable to (batch, heads, q, kv)."""
    bias = np.zeros((q_len, kv_len), dtype=dtype)
    mask = named.get("attn_mask")
    if mask is not None:
        if mask.dtype == np.bool_:
            mask = np.where(mask, dtype.type(0), dtype.type(-np.inf))
        else:
            mask = mask.astype(dtype, copy=False)
        short = kv_len - mask.shape[-1]
        if short > 0:  # a mask shorter than the keys masks the rest out
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, short)],
                          constant_values=-np.inf)
        bias = bias + mask
    nonpad = named.get("nonpad_kv_seqlen")
    offset: Any = past
    if nonpad is not None and "past_key" not in named:
        offset = nonpad.reshape(-1).astype(np.int64) - q_len
    if attrs.is_causal or attrs.left_window_size >= 0 or attrs.right_window_size >= 0:
        allowed = _offset_mask(q_len, kv_len, offset, attrs.left_window_size,
                               attrs.right_window_size, attrs.is_causal)
        bias = bias + np.where(allowed, dtype.type(0), dtype.type(-np.inf))
    if nonpad is not None:
        valid = np.arange(kv_len) < nonpad.reshape(-1, 1).astype(np.int64)
        bias = bias + np.where(valid, dtype.type(0), dtype.type(-np.inf)).reshape(
            batch, 1, 1, kv_len)
    return bias


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; an all -inf row gives zeros, not NaN."""
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), x.dtype.type(0), top)
    e = np.exp(x - top)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == 0, x.dtype.type(1), total)


def _attention(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    named = _split_inputs(attrs, inputs)
    batch, hq, hkv, q_len, kv_new, head, v_head = _heads(
        attrs, {name: value.shape for name, value in named.items()})
    query, key, value = named["query"], named["key"], named["value"]
    dtype = query.dtype
    rank = query.ndim
    if rank == 3:
        query, key, value = _to_heads(query, hq), _to_heads(key, hkv), _to_heads(value, hkv)
    past = 0
    if "past_key" in named:
        past = _past_length({n: a.shape for n, a in named.items()}, batch, hkv, head, v_head)
        key = np.concatenate([named["past_key"].astype(dtype, copy=False), key], axis=2)
        value = np.concatenate([named["past_value"].astype(dtype, copy=False), value], axis=2)
    present_key, present_value = np.ascontiguousarray(key), np.ascontiguousarray(value)
    kv_len = key.shape[2]
    scale = attrs.scale if attrs.scale is not None else 1 / np.sqrt(head)
    # The scale splits as sqrt(scale) on each side (as the spec's function
    # body does), which keeps float16 products in range.
    root = dtype.type(np.sqrt(scale))
    if hq != hkv:  # grouped-query attention: each key/value head serves hq/hkv query heads
        key = np.repeat(key, hq // hkv, axis=1)
        value = np.repeat(value, hq // hkv, axis=1)
    scores = np.matmul(query * root, np.swapaxes(key, -1, -2) * root)
    if attrs.softcap > 0:
        scores = np.tanh(scores / dtype.type(attrs.softcap)) * dtype.type(attrs.softcap)
    bias = _attention_bias(attrs, named, dtype, batch, q_len, kv_len, past)
    biased = scores + bias
    exposed = biased if attrs.qk_matmul_output_mode == 2 else scores
    work = biased
    if attrs.softmax_precision is not None:
        work = biased.astype(attrs.softmax_precision)
    probs = _softmax_rows(work)
    masked_rows = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    probs = np.where(masked_rows, probs.dtype.type(0), probs)
    if attrs.qk_matmul_output_mode == 3:
        exposed = probs
    out = np.matmul(probs.astype(dtype, copy=False), value)
    if rank == 3:
        out = out.transpose(0, 2, 1, 3).reshape(batch, q_len, hq * v_head)
    qk = np.broadcast_to(exposed, (batch, hq, q_len, kv_len)).astype(dtype)
    return [np.ascontiguousarray(out, dtype=dtype), present_key, present_value, qk]


_SOFTMAX_DTYPES = ("float16", "float32", "float64")


def _parse_softmax_dtype(text: str) -> str:
    if text not in _SOFTMAX_DTYPES:
        raise ValueError(f"softmax_precision must be one of {', '.join(_SOFTMAX_DTYPES)}")
    return text


def _parse_mode(text: str) -> int:
    mode = parse_int(text)
    if mode not in (0, 1, 2, 3):
        raise ValueError("qk_matmul_output_mode must be 0, 1, 2 or 3")
    return mode


def _parse_window(text: str) -> int:
    size = parse_int(text)
    if size < -1:
        raise ValueError("a window size must be -1 (unbounded) or at least 0")
    return size


register(OpDef(
    name=_ATTENTION, compute=_attention, infer_shape=_attention_shape,
    infer_type=_attention_type,
    params=(Param("scale", optional(parse_float), None), Param("is_causal", parse_bool, False),
            Param("q_num_heads", parse_int, 0), Param("kv_num_heads", parse_int, 0),
            Param("softcap", parse_float, 0.0), Param("qk_matmul_output_mode", _parse_mode, 0),
            Param("softmax_precision", optional(_parse_softmax_dtype), None),
            Param("left_window_size", _parse_window, -1),
            Param("right_window_size", _parse_window, -1),
            Param("has_mask", parse_bool, False), Param("has_past", parse_bool, False),
            Param("has_nonpad", parse_bool, False)),
    arguments=_attention_arguments,
    outputs=("output", "present_key", "present_value", "qk_matmul_output"),
    doc="ONNX Attention (opset 23+): scaled dot-product attention over 3-D (batch, length, "
        "heads*size) or 4-D (batch, heads, length, size) inputs, grouped-query heads, an "
        "additive or boolean mask, causal and sliding-window masks aligned to the cache's "
        "end, a key/value cache (past_key/past_value -> present_key/present_value), "
        "nonpad_kv_seqlen, softcap and qk_matmul_output modes 0-3. Host only."))


# ---- RotaryEmbedding -----------------------------------------------------------------------

_ROTARY = "_onnx_rotary_embedding"


def _rotary_arguments(attrs: Attrs) -> list[str]:
    names = ["data", "cos_cache", "sin_cache"]
    if attrs.has_position_ids:
        names.append("position_ids")
    return names


def _rotary(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, cos, sin = inputs[:3]
    if x.ndim == 4:  # (batch, heads, length, size) -> (batch, length, heads, size)
        work = x.transpose(0, 2, 1, 3)
    elif x.ndim == 3:
        if attrs.num_heads <= 0 or x.shape[2] % attrs.num_heads:
            raise OperatorError(f"{_ROTARY}: a 3-D input needs num_heads dividing its hidden "
                                f"size {x.shape[2]} (got num_heads={attrs.num_heads})")
        work = x.reshape(x.shape[0], x.shape[1], attrs.num_heads, -1)
    else:
        raise ShapeError(f"{_ROTARY}: input must be 3-D or 4-D, got shape {x.shape}")
    batch, length, _, size = work.shape
    dim = attrs.rotary_embedding_dim or size
    if dim > size or dim % 2:
        raise OperatorError(f"{_ROTARY}: rotary_embedding_dim {dim} must be even and at most "
                            f"the head size {size}")
    want = 2 if len(inputs) > 3 else 3
    for what, cache in (("cos_cache", cos), ("sin_cache", sin)):
        if cache.ndim != want:
            raise ShapeError(f"{_ROTARY}: {what} must be {want}-D "
                             f"({'(positions, dim/2)' if want == 2 else '(batch, length, dim/2)'}"
                             f"), got shape {cache.shape}")
    if len(inputs) > 3:
        if inputs[3].dtype.kind not in "iu":
            raise DTypeError(f"{_ROTARY}: position_ids must be integers, got "
                             f"{inputs[3].dtype.name}")
        ids = inputs[3].astype(np.int64)
        if ids.ndim != 2 or ids.shape != (batch, length):
            raise ShapeError(f"{_ROTARY}: position_ids has shape {ids.shape}, expected "
                             f"({batch}, {length})")
        if ids.size and (ids.min() < 0 or ids.max() >= cos.shape[0]):
            raise ShapeError(f"{_ROTARY}: position_ids outside the caches' {cos.shape[0]} "
                             "positions")
        cos, sin = cos[ids], sin[ids]
    half = dim // 2
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise ShapeError(f"{_ROTARY}: the caches' last extents ({cos.shape[-1]}, "
                         f"{sin.shape[-1]}) must be rotary_embedding_dim/2 = {half}")
    try:
        cos = np.broadcast_to(cos, (batch, length, half))[:, :, None, :]
        sin = np.broadcast_to(sin, (batch, length, half))[:, :, None, :]
    except ValueError:
        raise ShapeError(f"{_ROTARY}: caches of shape {cos.shape} do not fit (batch "
                         f"{batch}, length {length}, {half})") from None
    rotate = work[..., :dim]
    if attrs.interleaved:
        first, second = rotate[..., 0::2], rotate[..., 1::2]
    else:
        first, second = rotate[..., :half], rotate[..., half:]
    real = cos * first - sin * second
    imag = sin * first + cos * second
    if attrs.interleaved:
        rotated = np.stack([real, imag], axis=-1).reshape(rotate.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    out = np.concatenate([rotated, work[..., dim:]], axis=-1).astype(x.dtype, copy=False)
    out = out.reshape(x.shape) if x.ndim == 3 else out.transpose(0, 2, 1, 3)
    return [np.ascontiguousarray(out)]


def _rotary_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None:
        raise ShapeUnknownError(f"{_ROTARY}: the shape of the input is unknown")
    if len(shapes[0]) not in (3, 4):
        raise ShapeError(f"{_ROTARY}: input must be 3-D or 4-D, got shape {tuple(shapes[0])}")
    return list(shapes), [tuple(shapes[0])]


def _rotary_type(attrs: Attrs, dtypes: list) -> tuple[list, list]:
    if dtypes[0] is None:
        raise ShapeUnknownError(f"{_ROTARY}: the input's dtype is unknown")
    return list(dtypes), [np.dtype(dtypes[0])]


register(OpDef(
    name=_ROTARY, compute=_rotary, infer_shape=_rotary_shape, infer_type=_rotary_type,
    params=(Param("interleaved", parse_bool, False), Param("num_heads", parse_int, 0),
            Param("rotary_embedding_dim", parse_int, 0),
            Param("has_position_ids", parse_bool, False)),
    arguments=_rotary_arguments,
    doc="ONNX RotaryEmbedding (opset 23): rotates the first rotary_embedding_dim values of "
        "each head by the cos/sin caches (indexed by position_ids when given), half-split "
        "or interleaved pairs, on 3-D (num_heads given) or 4-D inputs. Host only."))


# ---- SwiGLU --------------------------------------------------------------------------------

_SWIGLU = "_onnx_swiglu"


def _swiglu(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    a, b = inputs
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ShapeError(f"{_SWIGLU}: A and B must have the same shape and dtype, got "
                         f"{a.shape} {a.dtype.name} and {b.shape} {b.dtype.name}")
    if a.dtype.kind != "f":
        raise DTypeError(f"{_SWIGLU}: inputs must be float tensors, got {a.dtype.name}")
    with np.errstate(over="ignore"):
        gate = (1 / (1 + np.exp(-attrs.alpha * a))).astype(a.dtype)
    return [(a * gate * b).astype(a.dtype)]


def _swiglu_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None or shapes[1] is None:
        raise ShapeUnknownError(f"{_SWIGLU}: the input shapes are unknown")
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise ShapeError(f"{_SWIGLU}: A and B must have the same shape, got "
                         f"{tuple(shapes[0])} and {tuple(shapes[1])}")
    return list(shapes), [tuple(shapes[0])]


register(OpDef(
    name=_SWIGLU, compute=_swiglu, infer_shape=_swiglu_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("alpha", parse_float, 1.0),), arguments=("a", "b"),
    doc="ONNX SwiGLU: A * sigmoid(alpha * A) * B, the gated unit of transformer feed-"
        "forward blocks. Host only."))
