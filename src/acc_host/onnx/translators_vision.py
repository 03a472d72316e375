"""ONNX GridSample, AffineGrid, RoiAlign, NonMaxSuppression, DFT, STFT,
Col2Im and DeformConv -> the host operators of :mod:`acc_host.ops.onnx_sampling`,
:mod:`acc_host.ops.onnx_nms`, :mod:`acc_host.ops.onnx_dft`,
:mod:`acc_host.ops.onnx_col2im` and :mod:`acc_host.ops.onnx_deform_conv`
(registered into TRANSLATORS on import)."""

from __future__ import annotations

import numpy as np

from .translators import Unsupported, _const, _input, _ints, onnx_op

_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest",
               "linear": "linear", "cubic": "cubic"}


@onnx_op("GridSample", since=16)
def _grid_sample(cx, node, attrs, inputs, opset):
    mode = attrs.get("mode", "linear" if opset >= 20 else "bilinear")
    if isinstance(mode, bytes):
        mode = mode.decode()
    padding = attrs.get("padding_mode", "zeros")
    if isinstance(padding, bytes):
        padding = padding.decode()
    if mode not in _GRID_MODES:
        raise Unsupported(f"GridSample mode {mode!r} (expected nearest, linear or cubic)")
    return [cx.op("_onnx_grid_sample", cx.sym(inputs[0]), cx.sym(inputs[1]),
                  mode=_GRID_MODES[mode], padding_mode=padding,
                  align_corners=bool(attrs.get("align_corners", 0)))]


@onnx_op("AffineGrid", since=20)
def _affine_grid(cx, node, attrs, inputs, opset):
    size = _ints(_const(cx, node, inputs, 1, "size"))
    return [cx.op("_onnx_affine_grid", cx.sym(inputs[0]), size=size,
                  align_corners=bool(attrs.get("align_corners", 0)))]


@onnx_op("NonMaxSuppression", since=10)
def _non_max_suppression(cx, node, attrs, inputs, opset):
    optional = [_input(inputs, index) for index in (2, 3, 4)]
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])] + [cx.sym(name) for name in optional if name]
    return [cx.op("_onnx_non_max_suppression", *args,
                  center_point_box=attrs.get("center_point_box", 0),
                  has_max_output=optional[0] is not None,
                  has_iou_threshold=optional[1] is not None,
                  has_score_threshold=optional[2] is not None)]


@onnx_op("DFT", since=17)
def _dft(cx, node, attrs, inputs, opset):
    length = _const(cx, node, inputs, 1, "dft_length")
    if opset >= 20:
        axis_value = _const(cx, node, inputs, 2, "axis")
        axis = -2 if axis_value is None else int(np.asarray(axis_value).reshape(-1)[0])
    else:
        axis = attrs.get("axis", 1)
    return [cx.op("_onnx_dft", cx.sym(inputs[0]), axis=axis,
                  inverse=bool(attrs.get("inverse", 0)),
                  onesided=bool(attrs.get("onesided", 0)),
                  dft_length=None if length is None
                  else int(np.asarray(length).reshape(-1)[0]))]


@onnx_op("STFT", since=17)
def _stft(cx, node, attrs, inputs, opset):
    step = int(np.asarray(_const(cx, node, inputs, 1, "frame_step")).reshape(-1)[0])
    window = _input(inputs, 2)
    length = _const(cx, node, inputs, 3, "frame_length")
    args = [cx.sym(inputs[0])] + ([cx.sym(window)] if window else [])
    return [cx.op("_onnx_stft", *args, frame_step=step,
                  frame_length=None if length is None
                  else int(np.asarray(length).reshape(-1)[0]),
                  onesided=bool(attrs.get("onesided", 1)), has_window=window is not None)]


@onnx_op("Col2Im", since=18)
def _col2im(cx, node, attrs, inputs, opset):
    image = _ints(_const(cx, node, inputs, 1, "image_shape"))
    block = _ints(_const(cx, node, inputs, 2, "block_shape"))
    return [cx.op("_onnx_col2im", cx.sym(inputs[0]), image_shape=image, block_shape=block,
                  strides=tuple(attrs.get("strides", ())),
                  dilations=tuple(attrs.get("dilations", ())),
                  pads=tuple(attrs.get("pads", ())))]


@onnx_op("DeformConv", since=19)
def _deform_conv(cx, node, attrs, inputs, opset):
    bias, mask = _input(inputs, 3), _input(inputs, 4)
    args = [cx.sym(name) for name in inputs[:3]] + [cx.sym(n) for n in (bias, mask) if n]
    return [cx.op("_onnx_deform_conv", *args,
                  kernel_shape=tuple(attrs.get("kernel_shape", ())),
                  strides=tuple(attrs.get("strides", ())),
                  dilations=tuple(attrs.get("dilations", ())),
                  pads=tuple(attrs.get("pads", ())), group=attrs.get("group", 1),
                  offset_group=attrs.get("offset_group", 1), has_bias=bias is not None,
                  has_mask=mask is not None)]


@onnx_op("RoiAlign", since=10)
def _roi_align(cx, node, attrs, inputs, opset):
    def text(name: str, default: str) -> str:
        value = attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else value

    transform = text("coordinate_transformation_mode",
                     "half_pixel" if opset >= 16 else "output_half_pixel")
    return [cx.op("_onnx_roi_align", *(cx.sym(name) for name in inputs[:3]),
                  mode=text("mode", "avg"), output_height=attrs.get("output_height", 1),
                  output_width=attrs.get("output_width", 1),
                  sampling_ratio=attrs.get("sampling_ratio", 0),
                  spatial_scale=attrs.get("spatial_scale", 1.0),
                  half_pixel=transform == "half_pixel")]
