"""Names of MXNet's mx.nd that live outside acc_host.ndarray: the random
samplers (mx.nd.random.*, the legacy mx.nd.random_normal, ...) and the
host operators (mx.nd.one_hot, sort, argsort, pick, ...). install() adds
them to the ndarray module when acc_host is imported."""

from __future__ import annotations

from types import ModuleType

from . import nd_contrib, random
from .ndarray.methods import host_functions

__all__ = ["install"]


def install(ndarray_module: ModuleType) -> None:
    extras: dict[str, object] = {"random": random, "contrib": nd_contrib, **random.LEGACY_NAMES,
                                 **host_functions()}
    for name, value in extras.items():
        setattr(ndarray_module, name, value)
