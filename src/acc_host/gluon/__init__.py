"""Gluon for inference (``mx.gluon``): blocks, parameters and ``gluon.nn``
layers, with MXNet 1.x's names and file formats. Training (Trainer, loss,
autograd) is out of scope. See block.py for how blocks run."""

from . import nn, rnn, utils
from .block import Block, HybridBlock, SymbolBlock
from .parameter import Constant, DeferredInitializationError, Parameter, ParameterDict

__all__ = ["Block", "HybridBlock", "SymbolBlock", "Parameter", "ParameterDict", "Constant",
           "DeferredInitializationError", "nn", "rnn", "utils"]
