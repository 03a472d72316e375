"""gluon.nn: layers for defining inference networks (see block.py)."""

from ..block import Block, HybridBlock, SymbolBlock
from .basic_layers import *  # noqa: F403
from .basic_layers import __all__ as _basic
from .conv_layers import *  # noqa: F403
from .conv_layers import __all__ as _conv

__all__ = ["Block", "HybridBlock", "SymbolBlock", *_basic, *_conv]
