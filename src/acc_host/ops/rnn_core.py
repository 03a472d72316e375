"""The recurrence shared by MXNet's fused ``RNN`` and ONNX's RNN/LSTM/GRU.

One direction of one layer is :func:`run_direction`: the input projection
of every time step is one matrix product, then each step adds the
recurrent product and applies the cell. Gates are in MXNet's order (LSTM
i, f, g, o; GRU r, z, n); the ONNX operator reorders its weights before
calling. Everything is computed in float64 (the reference the plugins are
tested against) and cast back by the callers.

Variable lengths: a sample of length L < T runs steps 0..L-1 (forward) or
L-1..0 (reverse); its outputs at steps >= L are zero and its final state is
the state after its last valid step (MXNet's cuDNN semantics and ONNX's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import OperatorError

__all__ = ["Activation", "Cell", "GATES", "activation", "run_direction"]

#: Gates per cell kind, in the order of the weight rows.
GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}

Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + exp(-x)) without overflow warnings for large |x|
    return np.exp(-np.logaddexp(0.0, -x))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


# ONNX activation name -> (function of (x, alpha, beta), default alpha, default beta);
# None where the function takes no such parameter.
_ACTIVATIONS: dict[str, tuple[Callable[[np.ndarray, float, float], np.ndarray],
                              float | None, float | None]] = {
    "relu": (lambda x, a, b: np.maximum(x, 0.0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0.0, 1.0), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0.0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1.0 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: _softplus(x), None, None),
}


def activation(op: str, name: str, alphas: list[float], betas: list[float]) -> Activation:
    """The activation function called name (ONNX's spelling, any case),
    taking its alpha and beta from the front of alphas/betas when it has such
    parameters (ONNX consumes activation_alpha/_beta in the order of the
    activations that use them)."""
    entry = _ACTIVATIONS.get(name.lower())
    if entry is None:
        raise OperatorError(f"{op}: unknown activation {name!r} (known: "
                            f"{', '.join(sorted(_ACTIVATIONS))})")
    fn, default_alpha, default_beta = entry
    alpha = (alphas.pop(0) if alphas else default_alpha) if default_alpha is not None else 0.0
    beta = (betas.pop(0) if betas else default_beta) if default_beta is not None else 0.0
    return lambda x: fn(x, alpha, beta)


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


@dataclass(frozen=True)
class Cell:
    """One direction's cell: kind (a GATES key), its activations (f: gates,
    g: candidate, h: output; rnn uses f alone), the pre-activation clip, the
    LSTM peepholes (i, f, o) and input-forget coupling, GRU's
    linear_before_reset, the LSTM cell-state clip and the LSTMP projection
    (P, H)."""

    kind: str
    f: Activation = _sigmoid
    g: Activation = _tanh
    h: Activation = _tanh
    clip: float | None = None
    peepholes: np.ndarray | None = None
    input_forget: bool = False
    linear_before_reset: bool = True
    state_clip: tuple[float | None, float | None] = (None, None)
    projection: np.ndarray | None = None

    @staticmethod
    def mxnet(mode: str) -> Cell:
        """The cell of MXNet's RNN operator in this mode."""
        if mode == "rnn_relu":
            return Cell("rnn_relu", f=_relu)
        if mode == "rnn_tanh":
            return Cell("rnn_tanh", f=_tanh)
        return Cell(mode)


def _clipped(cell: Cell, x: np.ndarray) -> np.ndarray:
    return x if cell.clip is None else np.clip(x, -cell.clip, cell.clip)


def _step(cell: Cell, gx: np.ndarray, h: np.ndarray, c: np.ndarray | None,
          w_h: np.ndarray, b_h: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """One time step: (new output state, new cell state, the visible output
    before projection). gx: the input projection of this step with its bias."""
    if cell.kind == "gru":
        hidden = h.shape[1]
        gh = h @ w_h.T + b_h
        r = cell.f(_clipped(cell, gx[:, :hidden] + gh[:, :hidden]))
        z = cell.f(_clipped(cell, gx[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden]))
        if cell.linear_before_reset:
            n_pre = gx[:, 2 * hidden:] + r * gh[:, 2 * hidden:]
        else:
            n_pre = (gx[:, 2 * hidden:] + (r * h) @ w_h[2 * hidden:].T + b_h[2 * hidden:])
        n = cell.g(_clipped(cell, n_pre))
        new_h = (1.0 - z) * n + z * h
        return new_h, None, new_h
    gates = gx + h @ w_h.T + b_h
    if cell.kind != "lstm":
        new_h = cell.f(_clipped(cell, gates))
        return new_h, None, new_h
    assert c is not None
    hidden = c.shape[1]
    pre_i, pre_f = gates[:, :hidden], gates[:, hidden:2 * hidden]
    pre_g, pre_o = gates[:, 2 * hidden:3 * hidden], gates[:, 3 * hidden:]
    if cell.peepholes is not None:
        pre_i = pre_i + cell.peepholes[0] * c
        pre_f = pre_f + cell.peepholes[1] * c
    i = cell.f(_clipped(cell, pre_i))
    f = 1.0 - i if cell.input_forget else cell.f(_clipped(cell, pre_f))
    g = cell.g(_clipped(cell, pre_g))
    new_c = f * c + i * g
    low, high = cell.state_clip
    if low is not None or high is not None:
        new_c = np.clip(new_c, low, high)
    if cell.peepholes is not None:
        pre_o = pre_o + cell.peepholes[2] * new_c
    o = cell.f(_clipped(cell, pre_o))
    out = o * cell.h(new_c)
    new_h = out if cell.projection is None else out @ cell.projection.T
    return new_h, new_c, new_h


def run_direction(cell: Cell, x: np.ndarray, w_x: np.ndarray, w_h: np.ndarray,
                  b_x: np.ndarray, b_h: np.ndarray, h0: np.ndarray, c0: np.ndarray | None,
                  lengths: Sequence[int] | None, reverse: bool
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One direction over x (T, N, I) in float64: (outputs (T, N, H'),
    final h (N, H'), final c (N, H) or None), H' the projection size when the
    cell projects, else the hidden size."""
    steps, batch = x.shape[0], x.shape[1]
    # the input projection of every step at once: one (T*N, I) x (I, G*H) product
    gx = (x.reshape(steps * batch, -1) @ w_x.T + b_x).reshape(steps, batch, -1)
    out = np.zeros((steps, batch, h0.shape[1]), dtype=np.float64)
    h, c = h0.copy(), None if c0 is None else c0.copy()
    if lengths is None:
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        for t in order:
            h, c, out[t] = _step(cell, gx[t], h, c, w_h, b_h)
        return out, h, c
    lengths_array = np.asarray(lengths, dtype=np.int64)
    for t in range(steps):
        active = lengths_array > t
        if not active.any():
            break
        # forward: step t of every sample longer than t; reverse: sample b
        # reads step L_b - 1 - t
        rows = np.nonzero(active)[0]
        times = (lengths_array[rows] - 1 - t) if reverse else np.full(rows.shape, t)
        new_h, new_c, visible = _step(cell, gx[times, rows], h[rows],
                                      None if c is None else c[rows], w_h, b_h)
        h[rows] = new_h
        if c is not None and new_c is not None:
            c[rows] = new_c
        out[times, rows] = visible
    return out, h, c
