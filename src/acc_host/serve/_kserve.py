"""Importing the KServe SDK. ``kserve.model_server`` parses ``sys.argv``
with an argparse parser of its own when it is imported (its module-level
``parse_known_args``), where ``acc-host serve --acc mlu`` would be read as
its ``--access_log_format``: the import runs with a bare ``sys.argv``."""

from __future__ import annotations

import sys
from typing import Any

from ..errors import MissingDependencyError

__all__ = ["import_kserve"]

INSTALL = 'pip install "acc-host[serve]"'


def import_kserve() -> Any:
    """The kserve package, with kserve.model_server loaded."""
    if "kserve.model_server" in sys.modules:
        return sys.modules["kserve"]
    saved = sys.argv
    sys.argv = saved[:1]
    try:
        import kserve
        import kserve.model_server  # noqa: F401
    except ImportError as error:
        raise MissingDependencyError(f"serving needs the KServe SDK ({error}): {INSTALL}"
                                     ) from None
    finally:
        sys.argv = saved
    return kserve
