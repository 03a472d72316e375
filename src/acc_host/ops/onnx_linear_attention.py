"""Host operator for ONNX LinearAttention (opset 27): attention as a
recurrence over a (d_k, d_v) state per key/value head, with the update
rules linear (state += k v^T), gated (the state decays by exp(decay)
first), delta (v is replaced by beta (v - state^T k)) and gated_delta
(both); output_t = scale * q_t^T state_t, grouped-query heads sharing a
state. Computed step by step in float32, as the specification states it.
Host only."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, OperatorError, ShapeError
from .params import Attrs, Param, choice, optional, parse_bool, parse_float, parse_int
from .registry import OpDef, ShapeUnknownError, register

_LINEAR_ATTENTION = "_onnx_linear_attention"
_OPTIONAL = ("past_state", "decay", "beta")


def _arguments(attrs: Attrs) -> list[str]:
    flags = (attrs.has_past_state, attrs.has_decay, attrs.has_beta)
    return ["query", "key", "value"] + [name for name, flag in zip(_OPTIONAL, flags) if flag]


def _geometry(attrs: Attrs, shapes: dict[str, tuple]) -> tuple[int, int, int, int, int]:
    """(batch, length, d_k, d_v, group size), checked against every input."""
    hq, hkv = attrs.q_num_heads, attrs.kv_num_heads
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise OperatorError(f"{_LINEAR_ATTENTION}: q_num_heads ({hq}) must be a positive "
                            f"multiple of kv_num_heads ({hkv})")
    gating = attrs.update_rule in ("gated", "gated_delta")
    delta = attrs.update_rule in ("delta", "gated_delta")
    if gating != ("decay" in shapes) or delta != ("beta" in shapes):
        raise OperatorError(f"{_LINEAR_ATTENTION}: update_rule {attrs.update_rule!r} takes "
                            f"{'a' if gating else 'no'} decay and {'a' if delta else 'no'} "
                            "beta input")
    q, k, v = shapes["query"], shapes["key"], shapes["value"]
    if len(q) != 3 or len(k) != 3 or len(v) != 3 or q[:2] != k[:2] or q[:2] != v[:2]:
        raise ShapeError(f"{_LINEAR_ATTENTION}: query, key and value must be (batch, length, "
                         f"heads * size) alike, got {q}, {k} and {v}")
    if q[2] % hq or k[2] % hkv or v[2] % hkv or q[2] // hq != k[2] // hkv:
        raise ShapeError(f"{_LINEAR_ATTENTION}: hidden sizes {q[2]}, {k[2]}, {v[2]} do not "
                         f"split into {hq} query and {hkv} key/value heads of one key size")
    batch, length = q[0], q[1]
    d_k, d_v = q[2] // hq, v[2] // hkv
    if "decay" in shapes:
        decay = shapes["decay"]
        if len(decay) != 3 or decay[:2] != (batch, length) or decay[2] not in (hkv, hkv * d_k):
            raise ShapeError(f"{_LINEAR_ATTENTION}: decay has shape {decay}, expected "
                             f"({batch}, {length}, {hkv} or {hkv * d_k})")
    if "beta" in shapes:
        beta = shapes["beta"]
        if len(beta) != 3 or beta[:2] != (batch, length) or beta[2] not in (hkv, 1):
            raise ShapeError(f"{_LINEAR_ATTENTION}: beta has shape {beta}, expected "
                             f"({batch}, {length}, {hkv} or 1)")
    if "past_state" in shapes and shapes["past_state"] != (batch, hkv, d_k, d_v):
        raise ShapeError(f"{_LINEAR_ATTENTION}: past_state has shape {shapes['past_state']}, "
                         f"expected {(batch, hkv, d_k, d_v)}")
    return batch, length, d_k, d_v, hq // hkv


def _heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, T, H*D) -> (B, H, T, D) in float32."""
    b, t, hidden = x.shape
    return x.reshape(b, t, heads, hidden // heads).transpose(0, 2, 1, 3).astype(np.float32)


def _linear_attention(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    named = dict(zip(_arguments(attrs), inputs))
    query = named["query"]
    for name, array in named.items():
        if array.dtype.kind != "f":
            raise DTypeError(f"{_LINEAR_ATTENTION}: {name} must be a float tensor, got "
                             f"{array.dtype.name}")
    batch, length, d_k, d_v, group = _geometry(
        attrs, {name: tuple(a.shape) for name, a in named.items()})
    hq, hkv = attrs.q_num_heads, attrs.kv_num_heads
    q, k, v = _heads(query, hq), _heads(named["key"], hkv), _heads(named["value"], hkv)
    decay = beta = None
    if "decay" in named:
        raw = named["decay"]
        decay = _heads(raw, hkv) if raw.shape[2] == hkv * d_k else \
            raw.reshape(batch, length, hkv, 1).transpose(0, 2, 1, 3).astype(np.float32)
    if "beta" in named:
        raw = named["beta"]
        beta = raw.reshape(batch, length, raw.shape[2], 1).transpose(0, 2, 1, 3) \
            .astype(np.float32)
    past = named.get("past_state")
    state = past.astype(np.float32) if past is not None else np.zeros(
        (batch, hkv, d_k, d_v), np.float32)
    scale = np.float32(attrs.scale if attrs.scale else 1 / np.sqrt(d_k))
    out = np.zeros((batch, hq, length, d_v), np.float32)
    for t in range(length):
        k_t, v_t = k[:, :, t], v[:, :, t]
        if decay is not None:
            state = state * np.exp(decay[:, :, t])[..., None]
        if beta is not None:
            v_t = beta[:, :, t] * (v_t - np.einsum("bhdm,bhd->bhm", state, k_t))
        state = state + k_t[..., :, None] * v_t[..., None, :]
        shared = np.repeat(state, group, axis=1) if group > 1 else state
        out[:, :, t] = scale * np.einsum("bhd,bhdm->bhm", q[:, :, t], shared)
    output = out.transpose(0, 2, 1, 3).reshape(batch, length, hq * d_v).astype(query.dtype)
    return [output, state.astype(past.dtype if past is not None else query.dtype)]


def _shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if any(shape is None for shape in shapes):
        raise ShapeUnknownError(f"{_LINEAR_ATTENTION}: an input shape is unknown")
    named = {name: tuple(shape) for name, shape in zip(_arguments(attrs), shapes)}
    batch, length, d_k, d_v, _ = _geometry(attrs, named)
    return list(shapes), [(batch, length, attrs.q_num_heads * d_v),
                          (batch, attrs.kv_num_heads, d_k, d_v)]


def _type(attrs: Attrs, dtypes: list) -> tuple[list, list]:
    if dtypes[0] is None:
        raise ShapeUnknownError(f"{_LINEAR_ATTENTION}: the query's dtype is unknown")
    state = dtypes[3] if attrs.has_past_state and dtypes[3] is not None else dtypes[0]
    return list(dtypes), [np.dtype(dtypes[0]), np.dtype(state)]


register(OpDef(
    name=_LINEAR_ATTENTION, compute=_linear_attention, infer_shape=_shape, infer_type=_type,
    params=(Param("q_num_heads", parse_int), Param("kv_num_heads", parse_int),
            Param("scale", optional(parse_float), None),
            Param("update_rule", choice("linear", "gated", "delta", "gated_delta"),
                  "gated_delta"),
            Param("has_past_state", parse_bool, False), Param("has_decay", parse_bool, False),
            Param("has_beta", parse_bool, False)),
    arguments=_arguments, outputs=("output", "present_state"),
    doc="ONNX LinearAttention (opset 27): the linear, gated, delta or gated-delta state "
        "recurrence over 3-D (batch, length, heads * size) inputs, grouped-query heads "
        "sharing a state; outputs the attention and the final state. Host only."))
