"""The KServe model of a :class:`~acc_host.serve.servable.Servable`: the
Open Inference Protocol (v2) on KServe's model server, HTTP/REST and gRPC.

KServe decodes the request (JSON or binary tensor data, gRPC's raw
contents) into an ``InferRequest``; :class:`AccModel` turns its inputs into
numpy arrays, runs them on a worker thread (the event loop stays free) and
answers an ``InferResponse``, binary where the request asked for binary
outputs. Its metadata lists the inputs and outputs with their v2 datatypes
and shapes (-1: the free batch axis). A bad request raises KServe's
``InvalidInput`` (HTTP 400, gRPC INVALID_ARGUMENT); a failure on the
accelerator its ``InferenceError`` (HTTP 500).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._kserve import import_kserve
from .logs import logger
from .metrics import record_device_stats, record_request
from .protocol import numpy_dtype, v2_datatype
from .servable import BadRequestError, PluginFailure, Servable, TensorInfo

kserve = import_kserve()
from kserve.errors import InferenceError, InvalidInput  # noqa: E402
from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse  # noqa: E402

__all__ = ["AccModel", "BaseAccModel", "decode_request", "encode_response", "tensor_metadata"]


def tensor_metadata(infos: list[TensorInfo]) -> list[dict[str, Any]]:
    """The metadata entries of inputs or outputs: name, datatype, shape."""
    return [{"name": info.name, "datatype": v2_datatype(info.dtype), "shape": list(info.shape)}
            for info in infos]


def decode_request(model: str, payload: Any) -> dict[str, np.ndarray]:
    """The request's inputs as numpy arrays by name (InvalidInput for a
    malformed one: repeated names, unknown datatypes, data that does not
    fill the shape)."""
    if not isinstance(payload, InferRequest):
        raise InvalidInput(f"model {model!r} speaks the Open Inference Protocol (v2): send "
                           f"POST /v2/models/{model}/infer")
    arrays: dict[str, np.ndarray] = {}
    for tensor in payload.inputs:
        if tensor.name in arrays:
            raise InvalidInput(f"model {model!r}: input {tensor.name!r} is given twice")
        try:
            dtype = numpy_dtype(tensor.datatype)
            shape = [int(d) for d in tensor.shape]
            if any(d < 0 for d in shape):
                raise BadRequestError(f"shape {shape} has a negative extent")
            array = tensor.as_numpy()
            if array.dtype != dtype:
                array = array.astype(dtype)
        except BadRequestError as error:
            raise InvalidInput(f"model {model!r}: input {tensor.name!r}: {error}") from None
        except (ValueError, TypeError) as error:
            raise InvalidInput(f"model {model!r}: input {tensor.name!r} ({tensor.datatype}, "
                               f"shape {list(tensor.shape)}): its data does not fit: {error}"
                               ) from None
        arrays[tensor.name] = array
    return arrays


def encode_response(model: str, request: InferRequest, outputs: Mapping[str, np.ndarray]
                    ) -> InferResponse:
    """The response of outputs, binary where the request asked for it."""
    binary = request.use_binary_outputs
    infer_outputs = []
    for name, value in outputs.items():
        output = InferOutput(name=name, shape=list(value.shape), datatype=v2_datatype(value.dtype))
        output.set_data_from_numpy(np.ascontiguousarray(value), binary_data=binary)
        infer_outputs.append(output)
    return InferResponse(response_id=request.id or str(uuid.uuid4()), model_name=model,
                         infer_outputs=infer_outputs, use_binary_outputs=binary,
                         requested_outputs=request.request_outputs)


class BaseAccModel(kserve.Model):  # type: ignore[misc,name-defined]
    """What the in-process model and the Ray front share: metadata, the
    decoding and encoding, metrics and logs; ``run(arrays)`` runs a request
    and returns (outputs, batch it ran in, accelerator, device, stats)."""

    def __init__(self, name: str, inputs: list[TensorInfo], outputs: list[TensorInfo]) -> None:
        super().__init__(name)
        self.inputs, self.outputs = inputs, outputs
        self.ready = True

    def load(self) -> bool:
        self.ready = True
        return self.ready

    def get_input_types(self) -> list[dict[str, Any]]:
        return tensor_metadata(self.inputs)

    def get_output_types(self) -> list[dict[str, Any]]:
        return tensor_metadata(self.outputs)

    async def run(self, arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int,
                                                                   str, int, dict[str, float]]:
        raise NotImplementedError

    async def predict(self, payload: Any, headers: Any = None,
                      response_headers: Any = None) -> InferResponse:
        start = time.perf_counter()
        request_id = getattr(payload, "id", None)
        batch = None
        try:
            arrays = decode_request(self.name, payload)
            outputs, batch, accelerator, device, stats = await self.run(arrays)
        except (InvalidInput, BadRequestError) as error:
            self._record("bad_request", start, batch, request_id, str(error))
            raise error if isinstance(error, InvalidInput) else InvalidInput(str(error)) from None
        except PluginFailure as error:
            self._record("error", start, batch, request_id, str(error))
            raise InferenceError(str(error)) from None
        if stats:
            record_device_stats(accelerator, device, stats)
        self._record("ok", start, batch, request_id, None)
        return encode_response(self.name, payload, outputs)

    def _record(self, outcome: str, start: float, batch: int | None, request_id: Any,
                error: str | None) -> None:
        seconds = time.perf_counter() - start
        record_request(self.name, outcome, seconds, batch)
        extra = {"model": self.name, "outcome": outcome, "seconds": round(seconds, 6),
                 "batch": batch, "request_id": request_id}
        if error is None:
            logger.debug("infer", extra=extra)
        else:
            logger.warning("infer failed: %s", error, extra=extra)


class AccModel(BaseAccModel):
    """A :class:`Servable` served in this process."""

    def __init__(self, servable: Servable) -> None:
        super().__init__(servable.name, servable.inputs, servable.outputs)
        self.servable = servable

    async def run(self, arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int,
                                                                   str, int, dict[str, float]]:
        loop = asyncio.get_running_loop()
        outputs = await loop.run_in_executor(None, self.servable.infer, arrays)
        ctx = self.servable.ctx
        batch = next(iter(arrays.values())).shape[0] if arrays else 1
        stats = await loop.run_in_executor(None, self.servable.device_stats)
        return outputs, batch, ctx.device_type, ctx.device_id, stats

    def stop(self) -> None:
        super().stop()
        self.servable.close()
