"""Versions of the operators the host passes to plugins.

mxnet_acc.h's rule: each operator has an integer version, starting at 1 and
incremented whenever its semantics, inputs, outputs or attributes change; the
host writes it as the "__op_version__" attribute on every operator it passes.
Bumping a version here makes every plugin that does not know the new version
decline the operator, which then runs on the CPU.
"""

from __future__ import annotations

__all__ = ["OP_VERSIONS", "op_version", "OP_VERSION_ATTR"]

OP_VERSION_ATTR = "__op_version__"

# Operators whose semantics changed since version 1 are listed here with
# their current version; every other operator is at version 1.
OP_VERSIONS: dict[str, int] = {}


def op_version(op_name: str) -> int:
    """The host's version of op_name."""
    return OP_VERSIONS.get(op_name, 1)
