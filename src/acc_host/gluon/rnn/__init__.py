"""gluon.rnn: the recurrent layers (RNN, LSTM, GRU, hybridized to MXNet's
fused RNN operator) and cells (RNNCell, LSTMCell, GRUCell)."""

from .rnn_cell import *  # noqa: F403
from .rnn_cell import __all__ as _cells
from .rnn_layer import *  # noqa: F403
from .rnn_layer import __all__ as _layers

__all__ = [*_layers, *_cells]
