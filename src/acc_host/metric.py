"""Evaluation metrics with MXNet 1.9's semantics (``mx.metric``).

A metric accumulates ``sum_metric`` and ``num_inst`` over ``update(labels,
preds)`` calls (lists of NDArrays or numpy arrays) and reports
``sum_metric / num_inst`` (``nan`` before any update). The per-metric rules
are MXNet's: Accuracy counts matching class indices (argmax over ``axis``
when the prediction has another shape than the label); TopKAccuracy counts
labels among the top_k scores; F1 is binary, averaged per update ("macro")
or over all samples ("micro"); MAE, MSE and RMSE average their per-update
values; CrossEntropy and NegativeLogLikelihood average over samples;
Perplexity is exp of the mean negative log-probability, skipping
ignore_label. Metrics compute on the host, in numpy.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, ShapeError
from .ndarray import NDArray

__all__ = ["EvalMetric", "CompositeEvalMetric", "Accuracy", "TopKAccuracy", "F1", "MAE", "MSE",
           "RMSE", "CrossEntropy", "NegativeLogLikelihood", "Perplexity", "Loss", "CustomMetric",
           "create", "register", "alias", "check_label_shapes", "np_metric"]

_REGISTRY: dict[str, type[EvalMetric]] = {}


def register(cls: type[EvalMetric]) -> type[EvalMetric]:
    """Makes create() know cls by its lower-case class name."""
    _REGISTRY[cls.__name__.lower()] = cls
    return cls


def alias(*names: str) -> Callable[[type[EvalMetric]], type[EvalMetric]]:
    def add(cls: type[EvalMetric]) -> type[EvalMetric]:
        for name in names:
            _REGISTRY[name.lower()] = cls
        return cls
    return add


def _host(value: Any) -> np.ndarray:
    if isinstance(value, NDArray):
        return value.asnumpy()
    return np.asarray(value)


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, (NDArray, np.ndarray)):
        return [value]
    return list(value)


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False,
                       shape: bool = False) -> tuple[Any, Any]:
    """Refuses label and prediction lists of different lengths (shapes with
    shape=True); wrap turns single arrays into lists."""
    if wrap:
        labels, preds = _as_list(labels), _as_list(preds)
    mine, theirs = ((tuple(labels.shape), tuple(preds.shape)) if shape
                    else (len(labels), len(preds)))
    if mine != theirs:
        raise ShapeError(f"metric: {mine} labels for {theirs} predictions")
    return labels, preds


class EvalMetric:
    """The base class: name, accumulated sums, get/reset."""

    def __init__(self, name: str, output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self) -> dict[str, Any]:
        config = dict(self._kwargs)
        config.update(metric=type(self).__name__, name=self.name,
                      output_names=self.output_names, label_names=self.label_names)
        return config

    def update_dict(self, label: Mapping[str, Any], pred: Mapping[str, Any]) -> None:
        preds = ([pred[name] for name in self.output_names] if self.output_names is not None
                 else list(pred.values()))
        labels = ([label[name] for name in self.label_names] if self.label_names is not None
                  else list(label.values()))
        self.update(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__}.update")

    def _add(self, value: float, count: float) -> None:
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count

    def reset(self) -> None:
        self.num_inst: float = 0
        self.sum_metric: float = 0.0
        self.global_num_inst: float = 0
        self.global_sum_metric: float = 0.0

    def reset_local(self) -> None:
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self) -> tuple[Any, Any]:
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, self.sum_metric / self.num_inst

    def get_global(self) -> tuple[Any, Any]:
        if not self._has_global_stats:
            return self.get()
        if self.global_num_inst == 0:
            return self.name, float("nan")
        return self.name, self.global_sum_metric / self.global_num_inst

    @staticmethod
    def _pairs(name: Any, value: Any) -> list[tuple[str, float]]:
        names = name if isinstance(name, list) else [name]
        values = value if isinstance(value, list) else [value]
        return list(zip(names, values))

    def get_name_value(self) -> list[tuple[str, float]]:
        return self._pairs(*self.get())

    def get_global_name_value(self) -> list[tuple[str, float]]:
        return self._pairs(*self.get_global())


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; get() lists all their values."""

    def __init__(self, metrics: Sequence[Any] | None = None, name: str = "composite",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        self.metrics: list[EvalMetric] = [create(metric) for metric in metrics or []]
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def add(self, metric: Any) -> None:
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        if not -len(self.metrics) <= index < len(self.metrics):
            raise InvalidArgumentError(f"metric index {index} is out of range for "
                                       f"{len(self.metrics)} metrics")
        return self.metrics[index]

    def update_dict(self, labels: Mapping[str, Any], preds: Mapping[str, Any]) -> None:
        if self.label_names is not None:
            labels = OrderedDict((k, v) for k, v in labels.items() if k in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict((k, v) for k, v in preds.items() if k in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        for metric in getattr(self, "metrics", []):
            metric.reset_local()

    def _collect(self, getter: str) -> tuple[list[str], list[float]]:
        names: list[str] = []
        values: list[float] = []
        for metric in self.metrics:
            name, value = getattr(metric, getter)()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values

    def get(self) -> tuple[Any, Any]:
        return self._collect("get")

    def get_global(self) -> tuple[Any, Any]:
        return self._collect("get_global")

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["metrics"] = [metric.get_config() for metric in self.metrics]
        return config


@register
@alias("acc")
class Accuracy(EvalMetric):
    def __init__(self, axis: int = 1, name: str = "accuracy",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _host(label), _host(pred)
            if pred.shape != label.shape:
                pred = np.argmax(pred, axis=self.axis)
            predicted = pred.astype(np.int32).ravel()
            expected = label.astype(np.int32).ravel()
            check_label_shapes(expected, predicted)
            self._add(int((predicted == expected).sum()), predicted.size)


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    def __init__(self, top_k: int = 1, name: str = "top_k_accuracy",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, top_k=top_k, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        if top_k <= 1:
            raise InvalidArgumentError("TopKAccuracy: top_k must be above 1 (use Accuracy for "
                                       "top_k=1)")
        self.top_k = top_k
        self.name += f"_{top_k}"

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            scores = _host(pred).astype(np.float32)
            if scores.ndim > 2:
                raise ShapeError(f"TopKAccuracy: predictions have {scores.ndim} dimensions, "
                                 "at most 2 are allowed")
            expected = _host(label).astype(np.int32).ravel()
            check_label_shapes(expected, scores)
            if scores.ndim == 1:
                ranked = np.argpartition(scores, -self.top_k)
                self._add(int((ranked == expected).sum()), scores.shape[0])
                continue
            classes = scores.shape[1]
            k = min(classes, self.top_k)
            # the k highest scores of each row (a set; their order does not matter)
            top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
            self._add(int((top == expected[:, None]).sum()), scores.shape[0])


class _BinaryCounts:
    """True/false positives/negatives of a binary classification."""

    def __init__(self) -> None:
        self.local = np.zeros(4, dtype=np.int64)  # tp, fp, fn, tn
        self.total = np.zeros(4, dtype=np.int64)

    def update(self, label: Any, pred: Any) -> None:
        scores, expected = _host(pred), _host(label).astype(np.int32)
        check_label_shapes(expected, scores)
        if len(np.unique(expected)) > 2:
            raise InvalidArgumentError("F1 supports binary classification only; the labels "
                                       f"have {len(np.unique(expected))} classes")
        predicted = np.argmax(scores, axis=1) == 1
        actual = expected.ravel() == 1
        counts = np.array([(predicted & actual).sum(), (predicted & ~actual).sum(),
                           (~predicted & actual).sum(), (~predicted & ~actual).sum()])
        self.local += counts
        self.total += counts

    @staticmethod
    def fscore(counts: np.ndarray) -> float:
        tp, fp, fn, _ = (float(value) for value in counts)
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        if precision + recall == 0:
            return 0.0
        return 2 * precision * recall / (precision + recall)


@register
class F1(EvalMetric):
    def __init__(self, name: str = "f1", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, average: str = "macro") -> None:
        if average not in ("macro", "micro"):
            raise InvalidArgumentError(f"F1: average must be 'macro' or 'micro', got "
                                       f"{average!r}")
        self.average = average
        self.counts = _BinaryCounts()
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self.counts.update(label, pred)
        if self.average == "macro":
            self.sum_metric += self.counts.fscore(self.counts.local)
            self.global_sum_metric += self.counts.fscore(self.counts.total)
            self.num_inst += 1
            self.global_num_inst += 1
            self.counts = _BinaryCounts()
        else:
            local, total = int(self.counts.local.sum()), int(self.counts.total.sum())
            self.sum_metric = self.counts.fscore(self.counts.local) * local
            self.global_sum_metric = self.counts.fscore(self.counts.total) * total
            self.num_inst, self.global_num_inst = local, total

    def reset(self) -> None:
        super().reset()
        self.counts = _BinaryCounts()

    def reset_local(self) -> None:
        super().reset_local()
        self.counts.local[:] = 0


def _columns(value: Any) -> np.ndarray:
    array = _host(value)
    return array.reshape(array.shape[0], 1) if array.ndim == 1 else array


class _Regression(EvalMetric):
    """The mean over updates of a per-update error of labels and predictions."""

    def __init__(self, name: str, output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    @staticmethod
    def error(difference: np.ndarray) -> float:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self._add(self.error(_columns(label) - _columns(pred)), 1)


@register
class MAE(_Regression):
    def __init__(self, name: str = "mae", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    @staticmethod
    def error(difference: np.ndarray) -> float:
        return float(np.abs(difference).mean())


@register
class MSE(_Regression):
    def __init__(self, name: str = "mse", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    @staticmethod
    def error(difference: np.ndarray) -> float:
        return float((difference ** 2.0).mean())


@register
class RMSE(_Regression):
    def __init__(self, name: str = "rmse", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    @staticmethod
    def error(difference: np.ndarray) -> float:
        return float(np.sqrt((difference ** 2.0).mean()))


def _picked(label: Any, pred: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    expected, scores = _host(label).ravel(), _host(pred)
    if expected.shape[0] != scores.shape[0]:
        raise ShapeError(f"{what}: {expected.shape[0]} labels for {scores.shape[0]} predictions")
    classes = expected.astype(np.int64)
    if scores.ndim != 2 or classes.size and (classes.min() < 0 or classes.max() >= scores.shape[1]):
        raise InvalidArgumentError(f"{what}: labels must be class indices below "
                                   f"{scores.shape[-1]} for predictions of shape {scores.shape}")
    return expected, scores[np.arange(expected.shape[0]), classes]


@register
@alias("ce")
class CrossEntropy(EvalMetric):
    def __init__(self, eps: float = 1e-12, name: str = "cross-entropy",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            expected, probability = _picked(label, pred, type(self).__name__)
            self._add(float((-np.log(probability + self.eps)).sum()), expected.shape[0])


@register
@alias("nll_loss")
class NegativeLogLikelihood(CrossEntropy):
    def __init__(self, eps: float = 1e-12, name: str = "nll-loss",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
class Perplexity(EvalMetric):
    def __init__(self, ignore_label: int | None, axis: int = -1, name: str = "perplexity",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, ignore_label=ignore_label, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        loss, count = 0.0, 0
        for label, pred in zip(labels, preds):
            scores = _host(pred)
            expected = _host(label).reshape(-1).astype(np.int32)
            if expected.size * scores.shape[-1] != scores.size:
                raise ShapeError(f"Perplexity: labels of shape {_host(label).shape} do not "
                                 f"fit predictions of shape {scores.shape}")
            axis = self.axis % scores.ndim
            moved = np.moveaxis(scores, axis, -1).reshape(-1, scores.shape[axis])
            classes = moved.shape[1]
            probability = moved[np.arange(expected.size), np.clip(expected, 0, classes - 1)]
            if self.ignore_label is not None:
                ignored = expected == self.ignore_label
                count -= int(ignored.sum())
                probability = np.where(ignored, 1.0, probability)
            loss -= float(np.log(np.maximum(1e-10, probability)).sum())
            count += probability.size
        self._add(loss, count)

    def get(self) -> tuple[Any, Any]:
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.sum_metric / self.num_inst)

    def get_global(self) -> tuple[Any, Any]:
        if self.global_num_inst == 0:
            return self.name, float("nan")
        return self.name, math.exp(self.global_sum_metric / self.global_num_inst)


@register
class Loss(EvalMetric):
    """The mean of the predictions (for outputs that are losses)."""

    def __init__(self, name: str = "loss", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, _: Any, preds: Any) -> None:
        for pred in _as_list(preds):
            values = _host(pred)
            self._add(float(values.sum()), values.size)


@register
class CustomMetric(EvalMetric):
    """feval(label, pred) -> value, or (sum, count), per pair of numpy arrays."""

    def __init__(self, feval: Callable[..., Any], name: str | None = None,
                 allow_extra_outputs: bool = False, output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None) -> None:
        if name is None:
            name = getattr(feval, "__name__", "custom")
            if "<" in name:
                name = f"custom({name})"
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs,
                         output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels: Any, preds: Any) -> None:
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(_as_list(labels), _as_list(preds)):
            value = self._feval(_host(label), _host(pred))
            if isinstance(value, tuple):
                self._add(value[0], value[1])
            else:
                self._add(value, 1)


def np_metric(numpy_feval: Callable[..., Any], name: str | None = None,
              allow_extra_outputs: bool = False) -> CustomMetric:
    """A CustomMetric over a function of numpy arrays: MXNet's ``metric.np``
    (a name that is numpy in this module)."""
    return CustomMetric(numpy_feval, name, allow_extra_outputs)




def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """A metric from a name ("acc", "top_k_accuracy", "f1", "mae", "ce", ...),
    an EvalMetric, a function (a CustomMetric) or a list of those (a
    CompositeEvalMetric)."""
    if isinstance(metric, EvalMetric):
        return metric
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, (list, tuple)):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if isinstance(metric, str):
        cls = _REGISTRY.get(metric.lower())
        if cls is None:
            raise InvalidArgumentError(f"unknown metric {metric!r} (known: "
                                       f"{', '.join(sorted(_REGISTRY))})")
        return cls(*args, **kwargs)
    raise InvalidArgumentError(f"cannot make a metric of {type(metric).__name__}")
