"""``acc-host partition MODEL --acc ...``: the partition of a model and, for
every operator, why it runs where it does."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..runtime.control_flow import with_bodies
from .errors import OK, USAGE, CliError
from .run_cmd import add_model_arguments, prepare

__all__ = ["add_parser", "run", "refiner"]

HELP = "show how a model is partitioned, why each operator is where it is, and boundary bytes"
DESCRIPTION = """\
Partition MODEL for an accelerator (nothing is compiled or run) and print
the segments and an explain report: for every operator, why it is where it
is (offloaded; unsupported op or dtype, as supportedOps answered and probing
the operator alone shows; a dtype the ABI cannot describe; kept on the CPU
because offloading would not pay or the candidate is below the plugin's
minimum subgraph size; cut from an earlier subgraph to avoid a cycle; on
another device), and every tensor crossing a subgraph boundary with its
shape, dtype and bytes. --format json is for scripts, dot for Graphviz; svg
and png draw the picture (boxes coloured by device, declined operators
outlined in red with the plugin's reason in the box and its tooltip, bytes
on the arrows that cross a boundary) with acc-host's own layered layout, no
Graphviz needed (png: matplotlib when installed, else a built-in
rasteriser); --renderer graphviz renders svg or png through Graphviz's 'dot'
program instead (exit 3 when it is not installed)."""

FORMATS = ("text", "json", "dot", "svg", "png")
RENDERERS = ("builtin", "graphviz")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("partition", help=HELP, description=DESCRIPTION)
    add_model_arguments(parser, acc_required=True)
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format")
    parser.add_argument("--output", "-o", default=None, metavar="FILE",
                        help="write there instead of stdout")
    parser.add_argument("--renderer", choices=RENDERERS, default="builtin",
                        help="who draws svg and png: acc-host's own layout (default) or "
                             "Graphviz's dot program")
    parser.set_defaults(handler=run)


def refiner(library: Any, partition: Any) -> Any:
    """refine(node, dev_id) for explain(): offers the refused operator alone
    (its attributes and shapes, as in the graph), then again with float32
    in place of its other dtypes, to tell an unsupported operator from an
    unsupported dtype. Answers are cached per operator signature."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    import numpy as np

    from ..abi.annotate import signature
    from ..errors import AccHostError
    from ..partition.segment import region_graph

    graph = partition.graph
    cache: dict[tuple[Any, ...], tuple[str, str] | None] = {}

    def accepted(k: int, dev_id: int, dtypes: Any) -> bool:
        annotated, to_graph = region_graph(graph, [k], partition.shapes, dtypes,
                                           partition.weight_names, dev_id)
        ids = library.supported_ops(json.dumps(annotated), signature(annotated).data,
                                    len(annotated["nodes"]), dev_id)
        return any(to_graph.get(i) == k for i in ids)

    def refine(k: int, dev_id: int) -> tuple[str, str] | None:
        node = graph.nodes[k]
        entries = [*graph.input_entries(k), graph.entry_start[k]]
        own = [np.dtype(partition.dtypes[e]) for e in entries]
        key = (node.op, tuple(sorted(node.attrs.items())), tuple(map(str, own)), dev_id)
        if key not in cache:
            cache[key] = _classify(k, dev_id, own, entries)
        return cache[key]

    def _classify(k: int, dev_id: int, own: list[Any], entries: list[int]
                  ) -> tuple[str, str] | None:
        op, label = graph.nodes[k].op, f"{partition.accelerator}({dev_id})"
        others = sorted({str(d) for d in own if d != np.float32})
        try:
            if accepted(k, dev_id, partition.dtypes):
                return ("unsupported", f"supportedOps on {label} accepts this {op} alone, not "
                        "within this graph")
            if others:
                as_float32 = list(partition.dtypes)
                for entry in entries:
                    as_float32[entry] = np.dtype(np.float32)
                if accepted(k, dev_id, as_float32):
                    return ("unsupported_dtype", f"{label} runs {op} in float32, not in "
                            f"{', '.join(others)}")
        except AccHostError:
            return None
        dtype = ", ".join(sorted({str(d) for d in own}))
        return ("unsupported_op", f"supportedOps on {label} does not accept {op} "
                f"({dtype}, with these attributes and shapes)")

    return refine


def run(args: argparse.Namespace) -> int:
    model, ctx, _ = prepare(args)
    if not ctx.is_accelerator:
        raise CliError("partition needs an accelerator: --acc NAME|PATH (not cpu)", USAGE)
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from .models import bind

    exe = bind(model, ctx)
    try:
        partition = exe.partition
        static = getattr(exe, "static_part", None)
        if partition is None and exe.offload_refused:
            # With data-dependent shapes only the static part before them
            # (executor.static_part) is offered to the accelerator.
            partition = static.partition if static is not None else None
            if partition is None:
                refused = f"{model.name}: nothing offloaded: {exe.offload_refused}\n"
                (open(args.output, "w", encoding="utf-8").write(refused) if args.output
                 else sys.stdout.write(refused))
                return OK
        explanation = partition.explain(refiner(ctx.library, partition),
                                        ctx.library.supports_imperative)
        explanation = with_bodies(exe, explanation)  # the bodies' placement, under their node
        text = _render(args.format, model, partition, explanation, args.renderer)
        if (exe.partition is None and exe.offload_refused and args.format == "text"
                and isinstance(text, str)):
            text = f"{model.name}: not offloaded: {exe.offload_refused}\n" + text
    finally:
        exe.close()
    if isinstance(text, bytes):
        if args.output is None and sys.stdout.isatty():
            raise CliError("--format png writes binary data: give --output FILE (or redirect "
                           "stdout)", USAGE)
        if args.output:
            with open(args.output, "wb") as binary:
                binary.write(text)
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
        return OK
    if args.output:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(text)
    else:
        sys.stdout.write(text)
    return OK


def _render(form: str, model: Any, partition: Any, explanation: Any,
            renderer: str = "builtin") -> str | bytes:
    if form == "json":
        return json.dumps(_json(model, partition, explanation), indent=2) + "\n"
    if form == "dot" or (form in ("svg", "png") and renderer == "graphviz"):
        dot = partition.to_dot(explanation) + "\n"
        if form == "dot":
            return dot
        # The subcommand's imports, made when it runs (the CLI loads lazily).
        from . import render

        return render.to_svg(dot) if form == "svg" else render.to_png(dot)
    if form in ("svg", "png"):
        # The subcommand's imports, made when it runs (the CLI loads lazily).
        from ..drawing import layout, to_png, to_svg
        from ..partition.picture import partition_drawing

        drawing = partition_drawing(partition, explanation,
                                    f"{model.source}: partition for {partition.accelerator}")
        placed = layout(drawing)
        # png: matplotlib where installed, else acc-host's own rasteriser.
        return to_svg(drawing, placed) if form == "svg" else to_png(drawing, placed)
    operators = len(explanation.nodes)
    offloaded = sum(1 for item in explanation.nodes if item.subgraph is not None)
    head = (f"{model.source}: {offloaded}/{operators} operators on {partition.accelerator} in "
            f"{len(partition.subgraphs)} subgraph(s)")
    return "\n".join([head, partition.summary(), "", explanation.format_text()]) + "\n"


def _json(model: Any, partition: Any, explanation: Any) -> dict[str, Any]:
    graph = partition.graph
    return {
        "model": model.source, "accelerator": partition.accelerator,
        "devices": list(partition.devices),
        "segments": [{"index": number,
                      "where": "cpu(0)" if seg.device_class == 0 else
                      f"{partition.accelerator}({partition.devices[seg.device_class - 1]})",
                      "nodes": [graph.nodes[k].name for k in seg.nodes]}
                     for number, seg in enumerate(partition.segments)],
        "summary": partition.summary().splitlines(),
        "explain": explanation.to_json(),
        "graph": partition.to_json(),
    }
