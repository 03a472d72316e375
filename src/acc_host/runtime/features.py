"""``mx.runtime``: the build features MXNet reports, as acc-host has them.

acc-host is not an MXNet build: every MXNet build feature (CUDA, MKLDNN,
OPENCV, ...) is reported disabled; accelerators are plugins, listed by
``mx.libraries()``."""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from ..errors import InvalidArgumentError

__all__ = ["Feature", "Features", "feature_list"]

# MXNet 1.9.1's feature names (libinfo), in its order
_NAMES = ("CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3",
          "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE",
          "F16C", "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK",
          "MKLDNN", "OPENCV", "CAFFE", "PROFILER", "DIST_KVSTORE", "CXX14", "INT64_TENSOR_SIZE",
          "SIGNAL_HANDLER", "DEBUG", "TVM_OP")


class Feature(NamedTuple):
    name: str
    enabled: bool

    def __repr__(self) -> str:
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def feature_list() -> list[Feature]:
    return [Feature(name, False) for name in _NAMES]


class Features(OrderedDict[str, Feature]):
    """The features by name."""

    def __init__(self) -> None:
        super().__init__((feature.name, feature) for feature in feature_list())

    def __repr__(self) -> str:
        return str(list(self.values()))

    def is_enabled(self, feature_name: str) -> bool:
        name = feature_name.upper()
        if name not in self:
            raise InvalidArgumentError(f"feature {feature_name!r} is unknown; known: "
                                       f"{', '.join(self)}")
        return self[name].enabled
