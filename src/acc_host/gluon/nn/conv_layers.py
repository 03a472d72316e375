"""gluon.nn's convolution and pooling layers (1-D, 2-D, 3-D), over the
registered Convolution and Pooling operators with MXNet's attributes."""

from __future__ import annotations

from typing import Any

from ..block import HybridBlock
from .basic_layers import _act

__all__ = ["Conv1D", "Conv2D", "Conv3D", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D",
           "AvgPool2D", "AvgPool3D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D",
           "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D"]


def _tuple(value: Any, count: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (int(value),) * count


class _Conv(HybridBlock):
    def __init__(self, channels: int, kernel_size: Any, strides: Any, padding: Any,
                 dilation: Any, groups: int, layout: str, in_channels: int = 0,
                 activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        dims = len(layout) - 2
        kernel = _tuple(kernel_size, dims)
        self._channels, self._in_channels = channels, in_channels
        self._attrs = {"kernel": kernel, "stride": _tuple(strides, dims),
                       "dilate": _tuple(dilation, dims), "pad": _tuple(padding, dims),
                       "num_filter": channels, "num_group": groups, "no_bias": not use_bias,
                       "layout": layout}
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(channels, in_channels // groups
                                                           if in_channels else 0, *kernel),
                                          init=weight_initializer, allow_deferred_init=True)
            self.bias = (self.params.get("bias", shape=(channels,), init=bias_initializer,
                                         allow_deferred_init=True) if use_bias else None)
            self.act = activation

    def _alias(self) -> str:
        return "conv"

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:  # noqa: N803
        inputs = [x, weight] if bias is None else [x, weight, bias]
        out = F.Convolution(*inputs, name=f"{self._prefix}fwd", **self._attrs)
        return _act(F, out, self.act, f"{self._prefix}{self.act}_fwd" if self.act else "")


class Conv1D(_Conv):
    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, layout: str = "NCW", **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         **kwargs)


class Conv2D(_Conv):
    def __init__(self, channels: int, kernel_size: Any, strides: Any = (1, 1),
                 padding: Any = (0, 0), dilation: Any = (1, 1), groups: int = 1,
                 layout: str = "NCHW", **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         **kwargs)


class Conv3D(_Conv):
    def __init__(self, channels: int, kernel_size: Any, strides: Any = (1, 1, 1),
                 padding: Any = (0, 0, 0), dilation: Any = (1, 1, 1), groups: int = 1,
                 layout: str = "NCDHW", **kwargs: Any) -> None:
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         **kwargs)


class _Pool(HybridBlock):
    def __init__(self, pool_size: Any, strides: Any, padding: Any, ceil_mode: bool,
                 global_pool: bool, pool_type: str, layout: str,
                 count_include_pad: bool | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        dims = len(layout) - 2
        size = _tuple(pool_size, dims)
        self._attrs: dict[str, Any] = {
            "kernel": size, "stride": _tuple(strides if strides is not None else size, dims),
            "pad": _tuple(padding, dims), "global_pool": global_pool, "pool_type": pool_type,
            "pooling_convention": "full" if ceil_mode else "valid", "layout": layout}
        if count_include_pad is not None:
            self._attrs["count_include_pad"] = count_include_pad

    def _alias(self) -> str:
        return "pool"

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.Pooling(x, name=f"{self._prefix}fwd", **self._attrs)


def _pool_class(name: str, dims: int, pool_type: str, global_pool: bool) -> type[_Pool]:
    layout_default = {1: "NCW", 2: "NCHW", 3: "NCDHW"}[dims]

    def __init__(self: _Pool, pool_size: Any = 2, strides: Any = None, padding: Any = 0,
                 layout: str = layout_default, ceil_mode: bool = False,
                 count_include_pad: bool | None = None, **kwargs: Any) -> None:
        if global_pool:
            pool_size, strides, padding = 1, 1, 0
        _Pool.__init__(self, pool_size, strides, padding, ceil_mode, global_pool, pool_type,
                       layout, count_include_pad if pool_type == "avg" else None, **kwargs)

    def global_init(self: _Pool, layout: str = layout_default, **kwargs: Any) -> None:
        _Pool.__init__(self, 1, 1, 0, True, True, pool_type, layout, None, **kwargs)

    return type(name, (_Pool,), {"__init__": global_init if global_pool else __init__,
                                 "__doc__": f"{pool_type} pooling over {dims}-D windows"
                                 + (" (global)" if global_pool else "")})


MaxPool1D = _pool_class("MaxPool1D", 1, "max", False)
MaxPool2D = _pool_class("MaxPool2D", 2, "max", False)
MaxPool3D = _pool_class("MaxPool3D", 3, "max", False)
AvgPool1D = _pool_class("AvgPool1D", 1, "avg", False)
AvgPool2D = _pool_class("AvgPool2D", 2, "avg", False)
AvgPool3D = _pool_class("AvgPool3D", 3, "avg", False)
GlobalMaxPool1D = _pool_class("GlobalMaxPool1D", 1, "max", True)
GlobalMaxPool2D = _pool_class("GlobalMaxPool2D", 2, "max", True)
GlobalMaxPool3D = _pool_class("GlobalMaxPool3D", 3, "max", True)
GlobalAvgPool1D = _pool_class("GlobalAvgPool1D", 1, "avg", True)
GlobalAvgPool2D = _pool_class("GlobalAvgPool2D", 2, "avg", True)
GlobalAvgPool3D = _pool_class("GlobalAvgPool3D", 3, "avg", True)
