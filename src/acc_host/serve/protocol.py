"""The Open Inference Protocol's (KServe v2) tensor datatypes and the numpy
dtypes acc_host runs, both ways (the protocol's "Tensor Data Types" table)."""

from __future__ import annotations

import numpy as np

from .servable import BadRequestError

__all__ = ["V2_DTYPES", "v2_datatype", "numpy_dtype"]

#: v2 datatype name -> numpy dtype (BYTES, strings, is not a tensor acc_host runs)
V2_DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
}
_NAMES = {dtype: name for name, dtype in V2_DTYPES.items()}


def v2_datatype(dtype: np.dtype) -> str:
    """The v2 name of a numpy dtype ("FP32" for float32)."""
    try:
        return _NAMES[np.dtype(dtype)]
    except KeyError:
        raise BadRequestError(f"dtype {np.dtype(dtype)} has no Open Inference Protocol "
                              "datatype") from None


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype of a v2 datatype name."""
    try:
        return V2_DTYPES[datatype.upper()]
    except (KeyError, AttributeError):
        raise BadRequestError(f"unknown datatype {datatype!r} (known: "
                              f"{', '.join(V2_DTYPES)})") from None
