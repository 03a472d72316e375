"""Serving models over the Open Inference Protocol with KServe's model
server: HTTP/REST (uvicorn) and gRPC on one event loop, KServe's
``/metrics`` (which carries acc_host.serve.metrics), JSON logs, and a
graceful stop on SIGTERM or SIGINT (KServe's handlers): the servers stop
accepting, requests in flight finish (up to ``grace_period`` seconds), the
models are unloaded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ._kserve import import_kserve
from .logs import configure_json_logging, logger
from .ports import check_ports_free

__all__ = ["serve", "GracefulModelServer", "DEFAULT_HTTP_PORT", "DEFAULT_GRPC_PORT",
           "DEFAULT_GRACE_PERIOD"]

DEFAULT_HTTP_PORT = 8080
DEFAULT_GRPC_PORT = 8081
DEFAULT_GRACE_PERIOD = 30
#: The largest gRPC message (KServe's default is 8 MiB: 8 images of 3x224x224 float32 at most)
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20


def serve(models: Sequence[Any], http_port: int = DEFAULT_HTTP_PORT,
          grpc_port: int | None = DEFAULT_GRPC_PORT, *,
          grace_period: int = DEFAULT_GRACE_PERIOD, json_logs: bool = True,
          max_threads: int = 4, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
    """Serves models (KServe models: :class:`~acc_host.serve.model.AccModel`,
    or the Ray front's) until SIGTERM or SIGINT; grpc_port None: HTTP only.
    max_message_bytes bounds a gRPC request and response. A port another
    process listens on is a PortInUseError, raised before anything starts
    (:mod:`.ports`: gRPC's own bind would share it)."""
    check_ports_free({"HTTP": http_port, "gRPC": grpc_port})
    # KServe's gRPC server reads its message limits from its parsed arguments.
    options = kserve.model_server.args
    options.grpc_max_receive_message_length = max_message_bytes
    options.grpc_max_send_message_length = max_message_bytes
    server = _server_class()(http_port=http_port, grpc_port=grpc_port or DEFAULT_GRPC_PORT,
                                enable_grpc=grpc_port is not None, workers=1,
                                max_threads=max_threads, enable_latency_logging=False,
                                grace_period=grace_period)
    _answer_malformed_bodies_with_400(kserve.model_server.app)
    if json_logs:
        configure_json_logging()
    logger.info("serving", extra={"models": ",".join(model.name for model in models),
                                  "http_port": http_port, "grpc_port": grpc_port})
    server.start(list(models))
    logger.info("stopped", extra={"models": ",".join(model.name for model in models)})


def _answer_malformed_bodies_with_400(app: Any) -> None:
    """FastAPI answers a body that is not JSON, or not an inference
    request, with 422 and its own "detail" list; the protocol's error is
    a 400 with {"error": message}, as KServe gives for the other bad
    requests."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    async def handler(_request: Any, error: Exception) -> Any:
        problems: list[dict[str, Any]] = getattr(error, "errors", list)()
        text = "; ".join(f"{'.'.join(str(p) for p in problem.get('loc', ()))}: "
                         f"{problem.get('msg', '')}" for problem in problems) or str(error)
        return JSONResponse(status_code=400, content={"error": f"malformed request: {text}"})

    app.add_exception_handler(RequestValidationError, handler)


def _server_class() -> Any:
    return GracefulModelServer


kserve = import_kserve()


class GracefulModelServer(kserve.ModelServer):  # type: ignore[misc,name-defined]
    """KServe's model server, stopping in order: uvicorn has drained the
    HTTP requests in flight by the time its signal reaches ``stop`` (it
    handles SIGTERM and SIGINT first, then passes them on); ``stop`` then
    stops gRPC with the grace period, which lets its calls in flight
    finish, and only then unloads the models (KServe's own ``stop`` unloads
    them at once, failing the gRPC calls still running)."""

    def stop(self, sig: int) -> None:
        async def shutdown() -> None:
            logger.info("stopping", extra={"signal": int(sig)})
            if self._grpc_server is not None:
                await self._grpc_server.stop(sig)
            if self._rest_multiprocess_server is not None:
                await self._rest_multiprocess_server.stop(sig)
            for name in list(self.registered_models.get_models()):
                self.registered_models.unload(name)

        self._stopping = asyncio.get_event_loop().create_task(shutdown())
