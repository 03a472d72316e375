"""Host operator for ONNX NonMaxSuppression.

Its output's length depends on the scores and boxes (data_dependent, like
``_onnx_nonzero``): it runs on the host path only, and offload refuses it
by name. Per batch and class, the boxes above score_threshold are taken in
order of decreasing score (ties: the lower box index first) and a box is
kept unless its intersection over union with a box already kept exceeds
iou_threshold, up to max_output_boxes_per_class boxes.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from .params import Attrs, Param, parse_bool, parse_int
from .registry import OpDef, ShapeUnknownError, register

_NMS = "_onnx_non_max_suppression"
_OPTIONAL = ("max_output_boxes_per_class", "iou_threshold", "score_threshold")


def _arguments(attrs: Attrs) -> list[str]:
    flags = (attrs.has_max_output, attrs.has_iou_threshold, attrs.has_score_threshold)
    return ["boxes", "scores"] + [name for name, flag in zip(_OPTIONAL, flags) if flag]


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """(y_min, x_min, y_max, x_max) of every box, whichever corners or
    centre format it came in."""
    if center_point_box:
        x, y, w, h = (boxes[..., k] for k in range(4))
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=-1)
    y1, x1, y2, x2 = (boxes[..., k] for k in range(4))
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Intersection over union of box with each of others (0 where either
    is empty or they do not overlap)."""
    top = np.maximum(box[0], others[:, 0])
    left = np.maximum(box[1], others[:, 1])
    bottom = np.minimum(box[2], others[:, 2])
    right = np.minimum(box[3], others[:, 3])
    overlap = (bottom > top) & (right > left)
    inter = np.where(overlap, (bottom - top) * (right - left), 0.0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    valid = overlap & (inter > 0) & (area > 0) & (areas > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(valid, inter / np.where(valid, union, 1), 0.0)


def _scalar(name: str, value: np.ndarray) -> float:
    if value.size != 1:
        raise ShapeError(f"{_NMS}: {name} must hold one value, got shape {value.shape}")
    return float(value.reshape(-1)[0])


def _nms(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    boxes, scores = inputs[0], inputs[1]
    if boxes.dtype.kind != "f" or scores.dtype.kind != "f":
        raise DTypeError(f"{_NMS}: boxes and scores must be float tensors, got "
                         f"{boxes.dtype.name} and {scores.dtype.name}")
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
            or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ShapeError(f"{_NMS}: boxes must be (batches, boxes, 4) and scores (batches, "
                         f"classes, boxes), got {boxes.shape} and {scores.shape}")
    given = dict(zip(_arguments(attrs)[2:], inputs[2:]))
    max_out = 0
    if "max_output_boxes_per_class" in given:
        if given["max_output_boxes_per_class"].dtype.kind not in "iu":
            raise DTypeError(f"{_NMS}: max_output_boxes_per_class must be an integer")
        max_out = max(int(_scalar("max_output_boxes_per_class",
                                  given["max_output_boxes_per_class"])), 0)
    iou_threshold = _scalar("iou_threshold", given["iou_threshold"]) \
        if "iou_threshold" in given else 0.0
    score_threshold = _scalar("score_threshold", given["score_threshold"]) \
        if "score_threshold" in given else None
    corners = _corners(boxes.astype(np.float64), attrs.center_point_box)
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            class_scores = scores[b, c].astype(np.float64)
            candidates = np.arange(class_scores.shape[0])
            if score_threshold is not None:
                candidates = candidates[class_scores > score_threshold]
            # Decreasing score, the lower index first among equal scores.
            order = candidates[np.lexsort((candidates, -class_scores[candidates]))]
            kept: list[int] = []
            for index in order:
                if len(kept) >= max_out:
                    break
                if kept and np.any(_iou(corners[b, index], corners[b, kept]) > iou_threshold):
                    continue
                kept.append(int(index))
                selected.append((b, c, int(index)))
    return [np.array(selected, dtype=np.int64).reshape(-1, 3)]


def _nms_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    raise ShapeUnknownError(f"{_NMS}: the output shape depends on the scores and boxes")


register(OpDef(
    name=_NMS, compute=_nms, infer_shape=_nms_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(np.int64)]),
    params=(Param("center_point_box", parse_int, 0), Param("has_max_output", parse_bool, False),
            Param("has_iou_threshold", parse_bool, False),
            Param("has_score_threshold", parse_bool, False)),
    arguments=_arguments, outputs=("selected_indices",), data_dependent=True,
    doc="ONNX NonMaxSuppression: (selected, 3) int64 rows (batch, class, box) of the boxes "
        "kept per batch and class. Its output shape depends on data: host path only."))
