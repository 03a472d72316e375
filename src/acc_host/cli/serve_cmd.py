"""``acc-host serve MODEL... --acc NAME``: serve models over the Open
Inference Protocol (KServe v2), HTTP/REST and gRPC, in this process or on
Ray Serve replicas (``--ray``), until SIGTERM or SIGINT (docs/serving.md)."""

from __future__ import annotations

import argparse
from typing import Any

from .errors import OK, USAGE, CliError, environment

__all__ = ["add_parser", "serve"]

HELP = "serve models over the Open Inference Protocol (KServe v2), HTTP and gRPC"
DESCRIPTION = """\
Serve each MODEL (an MXNet checkpoint prefix, or a folder holding
model-symbol.json, or an .onnx file; NAME=MODEL serves it as NAME) over the
Open Inference Protocol (KServe v2) with KServe's model server: health,
metadata and inference on HTTP (/v2/...) and gRPC, Prometheus metrics on
/metrics. Axis 0 of every input is the batch. An MXNet checkpoint needs
its data shape (--shape data=1,3,224,224). With --ray, Ray Serve replicas
(one per device of --devices) run the models with dynamic batching behind
the same protocol. Needs the serve extra: pip install "acc-host[serve]".
Stops on SIGTERM or SIGINT, after the requests in flight."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("serve", help=HELP, description=DESCRIPTION)
    parser.add_argument("models", nargs="+", metavar="MODEL",
                        help="[NAME=]MXNet checkpoint prefix or .onnx file")
    parser.add_argument("--acc", default="cpu", metavar="NAME|PATH",
                        help="accelerator name or library path; 'cpu' (default): the host path")
    parser.add_argument("--device", type=int, default=0, help="device id (default 0)")
    parser.add_argument("--epoch", type=int, default=0, help="checkpoint epoch (default 0)")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=D,D,...",
                        help="an input's shape (repeatable; axis 0, the batch, is free), "
                             "e.g. --shape data=1,3,224,224")
    parser.add_argument("--http-port", type=int, default=8080, help="HTTP port (default 8080)")
    parser.add_argument("--grpc-port", type=int, default=8081,
                        help="gRPC port (default 8081; 0: no gRPC)")
    parser.add_argument("--grace-period", type=int, default=30,
                        help="seconds the requests in flight get to finish at a stop (default 30)")
    ray = parser.add_argument_group("Ray Serve (acc_host.serve.ray)")
    ray.add_argument("--ray", action="store_true",
                     help="run the models on Ray Serve replicas with dynamic batching")
    ray.add_argument("--devices", default=None, metavar="I,J,...",
                     help="the devices the replicas own, one replica each (default: --device)")
    ray.add_argument("--replicas", type=int, default=None,
                     help="replicas per model (default: one per device)")
    ray.add_argument("--max-batch", type=int, default=8,
                     help="largest batch dynamic batching forms (default 8; 1: no batching)")
    ray.add_argument("--batch-wait-ms", type=float, default=2.0,
                     help="how long a batch waits to fill (default 2 ms)")
    ray.add_argument("--ray-address", default=None,
                     help="a running Ray cluster's address (default: a local cluster)")
    parser.set_defaults(handler=serve)


def _named(items: list[str]) -> list[tuple[str | None, str]]:
    named: list[tuple[str | None, str]] = []
    for item in items:
        name, sep, path = item.partition("=")
        named.append((name, path) if sep and name and "/" not in name else (None, item))
    return named


def _shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            shape = tuple(int(part) for part in text.split(",") if part)
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d <= 0 for d in shape):
            raise CliError(f"--shape {item!r}: expected NAME=D,D,... with positive extents",
                           USAGE)
        shapes[name] = shape
    return shapes


def _devices(args: argparse.Namespace) -> list[int]:
    if args.devices is None:
        return [args.device]
    try:
        devices = [int(part) for part in args.devices.split(",") if part]
    except ValueError:
        devices = []
    if not devices or any(d < 0 for d in devices):
        raise CliError(f"--devices {args.devices!r}: expected device ids, e.g. 0,1,2,3", USAGE)
    return devices


def serve(args: argparse.Namespace) -> int:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..errors import MissingDependencyError

    shapes = _shapes(args.shape)
    models = _named(args.models)
    for port in (args.http_port, args.grpc_port):
        if not 0 <= port < 65536:
            raise CliError(f"port {port} is out of range", USAGE)
    if args.max_batch < 1:
        raise CliError("--max-batch must be at least 1", USAGE)
    devices = _devices(args)
    try:
        if args.ray:
            _serve_on_ray(args, models, shapes, devices)
        else:
            _serve_here(args, models, shapes)
    except MissingDependencyError as error:
        raise environment(str(error)) from None
    except ImportError as error:  # a package of the serve extra missing
        raise environment(f"serving needs the serve extra ({error}): "
                          'pip install "acc-host[serve]"') from None
    return OK


def _check_shapes_used(shapes: dict[str, tuple[int, ...]], inputs: list[Any]) -> None:
    """Every --shape names an input of some model (each model takes those
    of its own inputs)."""
    names = {info.name for infos in inputs for info in infos}
    unused = sorted(set(shapes) - names)
    if unused:
        raise CliError(f"--shape {unused[0]}=...: no model has an input {unused[0]!r} "
                       f"(inputs: {', '.join(sorted(names))})", USAGE)


def _serve_here(args: argparse.Namespace, models: list[tuple[str | None, str]],
                shapes: dict[str, tuple[int, ...]]) -> None:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..errors import InvalidArgumentError, UnknownAcceleratorError
    from ..serve.ports import check_ports_free
    from ..serve.servable import load_servable

    # Before the models load (serve() checks again just before the start).
    check_ports_free({"HTTP": args.http_port, "gRPC": args.grpc_port or None})
    try:
        servables = [load_servable(source, args.acc, args.device, name=name,
                                   epoch=args.epoch, shapes=shapes, strict=False)
                     for name, source in models]
    except UnknownAcceleratorError as error:
        raise environment(str(error)) from None
    except InvalidArgumentError as error:  # a shape missing, a device that does not exist
        raise CliError(str(error), USAGE) from None
    _check_shapes_used(shapes, [servable.inputs for servable in servables])
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..serve.model import AccModel
    from ..serve.server import serve

    serve([AccModel(servable) for servable in servables], args.http_port,
          args.grpc_port or None, grace_period=args.grace_period)


def _serve_on_ray(args: argparse.Namespace, models: list[tuple[str | None, str]],
                  shapes: dict[str, tuple[int, ...]], devices: list[int]) -> None:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..serve.ray import ReplicaSpec, serve_on_ray

    specs = [ReplicaSpec(source=source, acc=args.acc, name=name, epoch=args.epoch,
                         shapes=shapes, devices=devices,
                         num_replicas=args.replicas or len(devices),
                         max_batch_size=args.max_batch,
                         batch_wait_timeout_s=args.batch_wait_ms / 1000.0)
             for name, source in models]
    serve_on_ray(specs, args.http_port, args.grpc_port or None, address=args.ray_address,
                 grace_period=args.grace_period)
