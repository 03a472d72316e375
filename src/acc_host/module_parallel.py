"""Data-parallel inference over several contexts: ``Module(sym,
context=[ctx0, ctx1, ...])``, as MXNet's Module does it.

Each context gets a Module of its own over the same symbol and parameters;
forward() splits every data and label array along axis 0 into contiguous
slices (MXNet's equal-workload rule: round(batch / n) each, the last one
taking what is left; an empty slice is an error), runs the parts (their
forwards are pushed to each context's engine worker and so overlap), and
get_outputs() concatenates the parts' outputs along axis 0 on the first
context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .context import Context
from .errors import InvalidArgumentError, ShapeError
from .io import DataBatch, DataDesc
from .module import Module, _descs
from .ndarray import NDArray, array

__all__ = ["DataParallelModule", "split_batch"]


def split_batch(batch_size: int, parts: int) -> list[slice]:
    """MXNet's _split_input_slice with equal workloads."""
    counts = [round(batch_size / parts)] * parts
    if sum(counts) < batch_size:
        counts[-1] += batch_size - sum(counts)
    slices, end = [], 0
    for count in counts:
        begin = min(end, batch_size)
        end = min(begin + count, batch_size)
        if begin >= end:
            raise ShapeError(f"a batch of {batch_size} cannot be split over {parts} contexts "
                             "without an empty part")
        slices.append(slice(begin, end))
    return slices


def _slice_descs(descs: Sequence[DataDesc], part: slice) -> list[DataDesc]:
    out = []
    for desc in descs:
        shape = tuple(desc.shape)
        width = part.stop - part.start
        out.append(DataDesc(desc.name, (width, *shape[1:]), desc.dtype))
    return out


class DataParallelModule(Module):
    """A Module over several contexts (made by ``Module(context=[...])``)."""

    def __init__(self, symbol: Any, data_names: Sequence[str] = ("data",),
                 label_names: Sequence[str] | None = ("softmax_label",),
                 context: Sequence[Context] | Context | None = None, logger: Any = None,
                 fixed_param_names: Sequence[str] | None = None,
                 state_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        given = list(context) if isinstance(context, (list, tuple)) else [context]
        contexts: list[Context] = [ctx for ctx in given if isinstance(ctx, Context)]
        if not contexts or len(contexts) != len(given):
            raise InvalidArgumentError(f"Module: context must be a Context or a list of "
                                       f"them, got {context!r}")
        super().__init__(symbol, data_names, label_names, contexts[0], **kwargs)
        self._contexts = contexts
        self._parts = [Module(symbol, data_names, label_names, ctx) for ctx in contexts]
        self._slices: list[slice] = []

    @property
    def contexts(self) -> list[Context]:
        return list(self._contexts)

    def bind(self, data_shapes: Sequence[Any], label_shapes: Sequence[Any] | None = None,
             for_training: bool = True, inputs_need_grad: bool = False,
             force_rebind: bool = False, shared_module: Module | None = None,
             grad_req: str = "write") -> None:
        if self._exec is not None and not force_rebind:
            return
        data, labels = _descs(data_shapes), _descs(label_shapes) if label_shapes else None
        self._slices = split_batch(data[0].shape[0], len(self._parts))
        for part, piece in zip(self._parts, self._slices):
            part.bind(_slice_descs(data, piece),
                      _slice_descs(labels, piece) if labels else None, for_training,
                      force_rebind=True)
        self._data_shapes, self._label_shapes = data, labels
        self._exec = self._parts[0]._exec  # binded; parameters live in the parts
        if self.params_initialized:
            self._share_parameters(self._parts[0].get_params())

    def init_params(self, initializer: Any = None, arg_params: Mapping[str, Any] | None = None,
                    aux_params: Mapping[str, Any] | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        if self.params_initialized and not force_init:
            return
        first = self._parts[0]
        first.init_params(initializer, arg_params, aux_params, allow_missing, True, allow_extra)
        self._share_parameters(first.get_params())
        self.params_initialized = True

    def _share_parameters(self, params: tuple[dict[str, NDArray], dict[str, NDArray]]) -> None:
        for part in self._parts[1:]:
            part.init_params(None, params[0], params[1], force_init=True)

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        return self._parts[0].get_params()

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        data = list(data_batch.data)
        size = data[0].shape[0]
        if not self._slices or sum(s.stop - s.start for s in self._slices) != size:
            self._slices = split_batch(size, len(self._parts))
            self._data_shapes = [DataDesc(desc.name, (size, *desc.shape[1:]), desc.dtype)
                                 for desc in self._data_shapes]
        labels = getattr(data_batch, "label", None)
        for part, piece in zip(self._parts, self._slices):
            part.forward(DataBatch([value[piece] for value in data],
                                   [value[piece] for value in labels] if labels else None),
                         is_train)

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        per_part = [part.get_outputs() for part in self._parts]
        if not merge_multi_context:
            return [list(outputs) for outputs in zip(*per_part)]
        return [array(np.concatenate([output.asnumpy() for output in outputs]),
                      ctx=self._contexts[0]) for outputs in zip(*per_part)]

    @property
    def output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        size = sum(s.stop - s.start for s in self._slices)
        return [(name, (size, *shape[1:])) for name, shape in self._parts[0].output_shapes]

    def reshape(self, data_shapes: Sequence[Any],
                label_shapes: Sequence[Any] | None = None) -> None:
        self.bind(data_shapes, label_shapes, force_rebind=True)
