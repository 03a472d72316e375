"""Dynamic batching's arithmetic: merging requests along axis 0 and
splitting the outputs back (acc_host.serve.ray runs it under Ray Serve's
``@serve.batch``). Requests merge when their inputs have the same names,
dtypes and extents past axis 0; every output's axis 0 must be the batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .servable import PluginFailure

__all__ = ["merge_batch", "split_outputs", "batch_size"]


def batch_size(arrays: Mapping[str, np.ndarray]) -> int:
    """Axis 0 of a request's (checked) inputs; 1 for a request without any."""
    return int(next(iter(arrays.values())).shape[0]) if arrays else 1


def merge_batch(requests: Sequence[Mapping[str, np.ndarray]]
                ) -> list[tuple[list[int], dict[str, np.ndarray]]]:
    """Groups of requests that can run as one batch, each group's inputs
    concatenated along axis 0, in request order: (the requests' indices, the
    merged inputs) per group."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, arrays in enumerate(requests):
        key = tuple((name, arrays[name].dtype.str, arrays[name].shape[1:])
                    for name in sorted(arrays))
        groups.setdefault(key, []).append(index)
    merged = []
    for indices in groups.values():
        first = requests[indices[0]]
        merged.append((indices, {name: first[name] if len(indices) == 1 else
                                 np.concatenate([requests[k][name] for k in indices], axis=0)
                                 for name in first}))
    return merged


def split_outputs(model: str, outputs: Mapping[str, np.ndarray], sizes: Sequence[int]
                  ) -> list[dict[str, np.ndarray]]:
    """The outputs of a merged batch cut back into the requests' parts
    (sizes: each request's batch, in merge order). An output whose axis 0
    is not the batch cannot be cut: PluginFailure."""
    total = sum(sizes)
    for name, value in outputs.items():
        if value.ndim == 0 or value.shape[0] != total:
            raise PluginFailure(f"model {model!r}: output {name!r} has shape "
                                f"{list(value.shape)}: its axis 0 is not the batch ({total}), "
                                "so requests cannot be batched; serve it with a max batch of 1")
    if len(sizes) == 1:
        return [dict(outputs)]
    parts = []
    start = 0
    for size in sizes:
        parts.append({name: value[start:start + size].copy() for name, value in outputs.items()})
        start += size
    return parts
