"""Host operator for ONNX DFT (opset 17+): the discrete Fourier transform
of a real (..., 1) or complex (..., 2) signal along one axis, forward or
inverse, full or one-sided (real input's non-negative frequencies; for the
inverse, a real signal from them). Host only; numpy's FFT computes it in
the input's precision (float16 in float32).
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, OperatorError, ShapeError
from .params import Attrs, Param, optional, parse_bool, parse_int
from .registry import OpDef, ShapeUnknownError, register

_DFT = "_onnx_dft"


def _plan(attrs: Attrs, shape: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
    """(axis, transform length, output shape) for an input shape; typed
    errors for a bad axis, length or layout."""
    rank = len(shape)
    if rank < 2 or shape[-1] not in (1, 2):
        raise ShapeError(f"{_DFT}: the input must end in an axis of 1 (real) or 2 (complex) "
                         f"values, got shape {shape}")
    if not -rank <= attrs.axis < rank:
        raise OperatorError(f"{_DFT}: axis {attrs.axis} is out of range for rank {rank}")
    axis = attrs.axis % rank
    if axis == rank - 1:
        raise OperatorError(f"{_DFT}: axis {attrs.axis} is the real/imaginary axis")
    if attrs.dft_length is not None:
        length = attrs.dft_length
    elif attrs.inverse and attrs.onesided:
        length = 2 * (shape[axis] - 1)
    else:
        length = shape[axis]
    if length < 1:
        raise OperatorError(f"{_DFT}: the transform length must be positive, got {length}")
    if attrs.onesided and not attrs.inverse and shape[-1] != 1:
        raise ShapeError(f"{_DFT}: a one-sided forward transform needs a real input (last "
                         f"axis 1), got shape {shape}")
    out = list(shape)
    if attrs.inverse:
        out[axis], out[-1] = length, 1 if attrs.onesided else 2
    else:
        out[axis], out[-1] = length // 2 + 1 if attrs.onesided else length, 2
    return axis, length, tuple(out)


def _dft(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    if x.dtype.kind != "f":
        raise DTypeError(f"{_DFT}: the input must be a float tensor, got {x.dtype.name}")
    axis, length, _ = _plan(attrs, x.shape)
    # In the input's precision (numpy's FFT keeps float32 as complex64), as
    # the specification's reference computes it.
    work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    signal = work[..., 0]
    if x.shape[-1] == 2:
        signal = signal + np.complex64(1j).astype(np.result_type(work.dtype, np.complex64)) \
            * work[..., 1]
    if attrs.inverse:
        if attrs.onesided:
            result = np.fft.irfft(signal, n=length, axis=axis)[..., None]
            return [result.astype(x.dtype)]
        spectrum = np.fft.ifft(signal, n=length, axis=axis)
    else:
        spectrum = np.fft.fft(signal, n=length, axis=axis)
        if attrs.onesided:
            spectrum = np.take(spectrum, np.arange(length // 2 + 1), axis=axis)
    return [np.stack([spectrum.real, spectrum.imag], axis=-1).astype(x.dtype)]


def _dft_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None:
        raise ShapeUnknownError(f"{_DFT}: the shape of the input is unknown")
    return list(shapes), [_plan(attrs, tuple(shapes[0]))[2]]


register(OpDef(
    name=_DFT, compute=_dft, infer_shape=_dft_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("axis", parse_int, -2), Param("inverse", parse_bool, False),
            Param("onesided", parse_bool, False),
            Param("dft_length", optional(parse_int), None)),
    doc="ONNX DFT: forward or inverse, full or one-sided discrete Fourier transform along "
        "axis (of the full input rank) of a real (..., 1) or complex (..., 2) signal, zero-"
        "padded or cut to dft_length. Host only."))


# ---- STFT ----------------------------------------------------------------------------------

_STFT = "_onnx_stft"


def _stft_plan(attrs: Attrs, shape: tuple[int, ...], window: tuple[int, ...] | None,
               ) -> tuple[int, tuple[int, ...]]:
    """(frame length, output shape); typed errors for bad frames."""
    if len(shape) != 3 or shape[-1] not in (1, 2):
        raise ShapeError(f"{_STFT}: the signal must be (batch, length, 1 or 2), got {shape}")
    if attrs.frame_step < 1:
        raise OperatorError(f"{_STFT}: frame_step must be positive, got {attrs.frame_step}")
    length = attrs.frame_length
    if length is None:
        length = window[0] if window is not None else shape[1]
    if window is not None and (len(window) != 1 or window[0] != length):
        raise ShapeError(f"{_STFT}: the window must be 1-D of the frame length {length}, got "
                         f"shape {window}")
    if not 1 <= length <= shape[1]:
        raise OperatorError(f"{_STFT}: frame length {length} does not fit the signal's "
                            f"{shape[1]} samples")
    if attrs.onesided and shape[-1] != 1:
        raise ShapeError(f"{_STFT}: a one-sided transform needs a real signal, got {shape}")
    frames = 1 + (shape[1] - length) // attrs.frame_step
    bins = length // 2 + 1 if attrs.onesided else length
    return length, (shape[0], frames, bins, 2)


def _stft(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    if x.dtype.kind != "f":
        raise DTypeError(f"{_STFT}: the signal must be a float tensor, got {x.dtype.name}")
    window = inputs[1] if len(inputs) > 1 else None
    length, (_, frames, bins, _) = _stft_plan(attrs, x.shape,
                                              None if window is None else window.shape)
    work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    starts = np.arange(frames) * attrs.frame_step
    taken = work[:, starts[:, None] + np.arange(length)[None, :], :]  # (B, frames, length, c)
    if window is not None:
        taken = taken * window.astype(work.dtype)[None, None, :, None]
    signal = taken[..., 0]
    if x.shape[-1] == 2:
        signal = signal + np.complex64(1j).astype(np.result_type(work.dtype, np.complex64)) \
            * taken[..., 1]
    spectrum = np.fft.fft(signal, n=length, axis=2)[:, :, :bins]
    return [np.stack([spectrum.real, spectrum.imag], axis=-1).astype(x.dtype)]


def _stft_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if any(shape is None for shape in shapes):
        raise ShapeUnknownError(f"{_STFT}: an input shape is unknown")
    window = tuple(shapes[1]) if len(shapes) > 1 else None
    return list(shapes), [_stft_plan(attrs, tuple(shapes[0]), window)[1]]


register(OpDef(
    name=_STFT, compute=_stft, infer_shape=_stft_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("frame_step", parse_int), Param("frame_length", optional(parse_int), None),
            Param("onesided", parse_bool, True), Param("has_window", parse_bool, False)),
    arguments=lambda attrs: ["signal", "window"] if attrs.has_window else ["signal"],
    doc="ONNX STFT: the DFT of each frame (frame_length samples every frame_step, times "
        "the window) of a real or complex (batch, length, 1 or 2) signal; output (batch, "
        "frames, bins, 2). Host only."))
