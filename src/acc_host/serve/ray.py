"""Ray Serve replicas with dynamic batching, behind the Open Inference
Protocol (docs/serving.md).

A model is a Ray Serve deployment of :class:`AccReplica` with
``num_replicas`` replicas; replica ``k`` (its rank on its node) owns device
``devices[k % len(devices)]`` of the accelerator and binds the model there.
Concurrent requests are merged by Ray Serve's ``@serve.batch`` (up to
``max_batch_size`` requests, waiting at most ``batch_wait_timeout_s`` for
them): requests whose inputs agree past axis 0 are concatenated along axis
0, run as one forward, and the outputs split back per request. In front,
KServe's model server speaks the protocol (HTTP/REST and gRPC) in the
driver process, checks each request against the model's inputs and hands
it to the deployment (:class:`RayAccModel`); Ray routes it to a replica.

Nothing here is particular to one machine: on a multi-node cluster
(``address=``) Ray places the replicas on the nodes, each of which needs
acc-host with the serve extra installed and the plugins discoverable there
(the bundled ones, ``MXNET_ACC_LIBRARIES``, entry points), and the model
files at the same path.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MissingDependencyError
from .batching import batch_size, merge_batch, split_outputs
from .model import BaseAccModel
from .servable import (
    BadRequestError,
    PluginFailure,
    TensorInfo,
    check_request,
    load_servable,
    model_name,
)

try:
    import ray
    from ray import serve
except ImportError as error:  # pragma: no cover - the serve extra is missing
    raise MissingDependencyError(f"Ray Serve is not installed ({error}): "
                                 'pip install "acc-host[serve]"') from None

__all__ = ["ReplicaSpec", "AccReplica", "RayAccModel", "deploy", "serve_on_ray",
           "start_ray", "stop_ray"]

Result = tuple[dict[str, np.ndarray], int, str, int, dict[str, float]]


@dataclass
class ReplicaSpec:
    """A model's deployment: the model (source, name, epoch, input shapes),
    the accelerator and the devices its replicas own, how many replicas,
    and the dynamic batching (max_batch_size 1: none). A replica takes up
    to max_ongoing_requests requests at once (at least two batches: one
    running, one filling); it reserves replica_cpus CPUs from Ray (0: a
    replica is bound by its device, and a 2-core machine holds 4)."""

    source: str
    acc: str = "cpu"
    name: str | None = None
    epoch: int = 0
    shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    devices: Sequence[int] = (0,)
    num_replicas: int | None = None
    max_batch_size: int = 8
    batch_wait_timeout_s: float = 0.002
    replica_cpus: float = 0.0
    max_ongoing_requests: int = 32

    @property
    def model(self) -> str:
        return self.name or model_name(self.source)

    @property
    def replicas(self) -> int:
        return self.num_replicas or len(self.devices)


@serve.deployment(name="acc_host_model")
class AccReplica:
    """A replica: the model bound on the device its rank owns."""

    def __init__(self, spec: ReplicaSpec) -> None:
        context = serve.get_replica_context()
        rank: Any = getattr(context.rank, "local_rank", context.rank)
        self.device = int(spec.devices[int(rank) % len(spec.devices)])
        self.servable = load_servable(spec.source, spec.acc, self.device, name=spec.model,
                                      epoch=spec.epoch, shapes=spec.shapes, strict=False)
        self.batching = spec.max_batch_size > 1 and self.servable.batch_free
        # @serve.batch's setters, on the wrapper it makes
        batcher: Any = self.infer_batch
        batcher.set_max_batch_size(max(1, spec.max_batch_size))
        batcher.set_batch_wait_timeout_s(spec.batch_wait_timeout_s)

    def describe(self) -> dict[str, Any]:
        """The model's inputs and outputs, and where this replica runs."""
        return {"inputs": self.servable.inputs, "outputs": self.servable.outputs,
                "accelerator": self.servable.ctx.device_type, "device": self.device,
                "pid": os.getpid()}

    async def __call__(self, arrays: dict[str, np.ndarray]) -> Result:
        checked = self.servable.check(arrays)
        if self.batching:
            return await self.infer_batch(checked)
        return (await self._run([checked]))[0]

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.002)
    async def infer_batch(self, requests: list[dict[str, np.ndarray]]) -> list[Result]:
        return await self._run(requests)

    async def _run(self, requests: list[dict[str, np.ndarray]]) -> list[Result]:
        loop = asyncio.get_running_loop()
        ctx = self.servable.ctx
        results: list[Result | None] = [None] * len(requests)
        for indices, merged in merge_batch(requests):
            outputs = await loop.run_in_executor(None, self.servable.infer, merged)
            stats = await loop.run_in_executor(None, self.servable.device_stats)
            batch = batch_size(merged)
            parts = split_outputs(self.servable.name, outputs,
                                  [batch_size(requests[k]) for k in indices])
            for k, part in zip(indices, parts):
                results[k] = (part, batch, ctx.device_type, self.device, stats)
                stats = {}
        return [result for result in results if result is not None]


class RayAccModel(BaseAccModel):  # type: ignore[misc]
    """The KServe model in front of a deployment: checks a request against
    the model's inputs, then awaits a replica's answer."""

    def __init__(self, name: str, inputs: list[TensorInfo], outputs: list[TensorInfo],
                 handle: Any) -> None:
        super().__init__(name, inputs, outputs)
        self.handle = handle

    async def run(self, arrays: dict[str, np.ndarray]) -> Result:
        checked = check_request(self.name, self.inputs, arrays)
        try:
            result: Result = await self.handle.remote(checked)
        except (BadRequestError, PluginFailure):
            raise
        except Exception as error:  # a replica's error arrives wrapped by Ray
            cause = getattr(error, "cause", None)
            if isinstance(cause, (BadRequestError, PluginFailure)):
                raise cause from None
            raise PluginFailure(f"model {self.name!r}: the replica failed: "
                                f"{type(error).__name__}: {error}") from None
        return result


def start_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Connects to the Ray cluster at address, or starts a local one (no
    dashboard), and starts Ray Serve without its own HTTP proxy: the
    protocol is served by KServe's server in front."""
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            # "local": a new cluster of this process's own, never one that
            # `ray start` left running on the machine
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                     include_dashboard=False, log_to_driver=False)
    serve.start(proxy_location="Disabled")


def stop_ray() -> None:
    """Stops Ray Serve (its replicas finish their requests first) and
    disconnects from Ray (a local cluster stops)."""
    try:
        serve.shutdown()
    finally:
        ray.shutdown()


def deploy(spec: ReplicaSpec) -> Any:
    """Runs spec's deployment as a Ray Serve application named after the
    model and returns its KServe front model."""
    deployment = AccReplica.options(  # type: ignore[attr-defined]
        name=f"acc_host_{spec.model}", num_replicas=spec.replicas,
        max_ongoing_requests=max(spec.max_ongoing_requests, 2 * spec.max_batch_size),
        ray_actor_options={"num_cpus": spec.replica_cpus},
        logging_config={"encoding": "JSON", "log_level": "INFO"})
    handle = serve.run(deployment.bind(spec), name=spec.model, route_prefix=None)
    described = handle.describe.remote().result()
    return RayAccModel(spec.model, described["inputs"], described["outputs"], handle)


def serve_on_ray(specs: Sequence[ReplicaSpec], http_port: int = 8080,
                 grpc_port: int | None = 8081, *, address: str | None = None,
                 grace_period: int = 30) -> None:
    """Deploys each spec on Ray Serve and serves them over the protocol
    until SIGTERM or SIGINT; then the front drains, and Ray Serve stops."""
    from .server import serve as serve_models

    start_ray(address)
    try:
        models = [deploy(spec) for spec in specs]
        serve_models(models, http_port, grpc_port, grace_period=grace_period)
    finally:
        stop_ray()
