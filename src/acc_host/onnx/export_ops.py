"""The table of MXNet operator -> ONNX exporter functions.

Each exporter is registered under the canonical MXNet operator name (aliases
such as ``reshape`` or ``_Plus`` resolve through the operator registry). The
functions live in :mod:`export_nn` (layers, normalization, activations) and
:mod:`export_tensor` (arithmetic, element-wise math, shapes, indexing,
reductions); importing this module's :func:`exporter_for` loads both.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ops import registry
from .export_builder import GraphBuilder, OpNode

__all__ = ["Exporter", "EXPORTERS", "exports", "exporter_for", "exported_operators"]

Exporter = Callable[[GraphBuilder, OpNode], None]

EXPORTERS: dict[str, Exporter] = {}


def exports(*names: str) -> Callable[[Exporter], Exporter]:
    """Registers the decorated function as the exporter of the named
    (canonical) MXNet operators."""
    def register(fn: Exporter) -> Exporter:
        for name in names:
            if name in EXPORTERS:
                raise ValueError(f"operator {name!r} has two exporters")
            EXPORTERS[name] = fn
        return fn
    return register


def _load_all() -> None:
    # Here, not at the top: the exporter modules import this one to register.
    from . import export_nn, export_rnn, export_tensor  # noqa: F401


def canonical(op_name: str) -> str:
    """The registered name of an operator or alias (the name itself when unknown)."""
    op = registry.find(op_name)
    return op.name if op is not None else op_name


def exporter_for(op_name: str) -> Exporter | None:
    _load_all()
    return EXPORTERS.get(canonical(op_name))


def exported_operators() -> list[str]:
    """Every MXNet operator name (aliases included) export_model writes."""
    _load_all()
    return sorted(name for name, op in registry.all_ops().items() if op.name in EXPORTERS)
