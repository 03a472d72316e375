"""``acc-host run MODEL --acc NAME|PATH``: run a model and say what ran
where, how long compiling and running took, and what came out."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from ..phases import recording
from ..runtime.control_flow import body_lines, body_subgraphs
from .errors import FAILURE, OK, USAGE, CliError
from .progress import Progress, enabled

__all__ = ["add_parser", "add_model_arguments", "run"]

HELP = "run a model (MXNet checkpoint or .onnx) on an accelerator and report it"
DESCRIPTION = """\
Run MODEL (an MXNet checkpoint prefix, i.e. PREFIX-symbol.json and
PREFIX-EPOCH.params, or a folder holding model-symbol.json; or an .onnx
file) on an accelerator. Prints each output's shape, dtype, min/max/mean
(and top-5 classes of a class vector), the partition (which operators ran
where), the bind, compile and first-forward times, and the median of
--repeat forwards. Inputs come from --input, or are random (normal floats,
integers in [0, 2)) with --seed; an MXNet checkpoint needs --shape or
--input for its data."""


def add_model_arguments(parser: argparse.ArgumentParser, acc_required: bool) -> None:
    """The arguments run and partition share."""
    parser.add_argument("model", metavar="MODEL",
                        help="MXNet checkpoint prefix (PREFIX-symbol.json, PREFIX-0000.params) "
                             "or .onnx file")
    parser.add_argument("--acc", required=acc_required, default="cpu", metavar="NAME|PATH",
                        help="accelerator name or library path" +
                             ("" if acc_required else "; 'cpu' (default): the host CPU path"))
    parser.add_argument("--device", type=int, default=0, help="device id (default 0)")
    parser.add_argument("--epoch", type=int, default=0, help="checkpoint epoch (default 0)")
    parser.add_argument("--shape", action="append", default=[], metavar="[NAME=]D,D,...",
                        help="an input's shape (repeatable), e.g. --shape data=1,3,224,224")
    parser.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE",
                        help="an input array: .npy (NAME= for one of several inputs) or .npz "
                             "of named arrays (repeatable)")
    parser.add_argument("--batch", type=int, default=None,
                        help="batch size: replaces the first dimension of every input")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("run", help=HELP, description=DESCRIPTION)
    add_model_arguments(parser, acc_required=False)
    parser.add_argument("--repeat", type=int, default=5,
                        help="timed forwards after the first (default 5); the median is shown")
    parser.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    parser.add_argument("--check", action="store_true",
                        help="differential mode: also run every offloaded subgraph on the CPU "
                        "path, compare, and narrow a mismatch to its first diverging node "
                        "(exit 1 on a mismatch)")
    parser.add_argument("--trace", metavar="PATH",
                        help="record every ABI call to PATH (see 'acc-host replay')")
    parser.set_defaults(handler=run)


def prepare(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    """(model, context, input values) from the shared arguments."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from .libraries import context_for
    from .models import load_model, make_inputs, parse_shapes, read_inputs

    if args.batch is not None and args.batch < 1:
        raise CliError("--batch must be at least 1", USAGE)
    shapes = parse_shapes(args.shape)
    arrays = read_inputs(args.input)
    ctx = context_for(args.acc, args.device)
    model = load_model(args.model, args.epoch, shapes, arrays, args.batch)
    return model, ctx, make_inputs(model, arrays, getattr(args, "seed", 0))


def _where(exe: Any, ctx: Any) -> dict[str, Any]:
    placement = list(exe.placement().values())
    on_cpu = placement.count("cpu(0)")
    partition = exe.partition
    return {"context": str(ctx), "operators": len(placement),
            "offloaded": len(placement) - on_cpu, "on_cpu": on_cpu,
            "subgraphs": 0 if partition is None else len(partition.subgraphs),
            "partition": ([] if partition is None else partition.summary().splitlines())
            + body_lines(exe),
            "declined": [] if partition is None else declined_nodes(partition),
            "refused": getattr(exe, "offload_refused", None)}


def declined_nodes(partition: Any) -> list[dict[str, Any]]:
    """The operators left on the CPU that the plugin declined with a reason
    (supportedOpsReasons, ABI 1.1): node name, op, device and reason."""
    graph = partition.graph
    offloaded = {k for spec in partition.subgraphs for k in spec.nodes}
    rows = []
    for dev_id, reasons in partition.declined.items():
        for k, reason in sorted(reasons.items()):
            if k not in offloaded:
                node = graph.nodes[k]
                rows.append({"node": node.name, "op": node.op,
                             "device": f"{partition.accelerator}({dev_id})", "reason": reason})
    return rows


def _declined_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per operator, device and reason, with the nodes (the first
    3 named) it covers; --json lists every node."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for row in rows:
        groups.setdefault((row["op"], row["device"], row["reason"]), []).append(row["node"])
    lines = []
    for (op, device, reason), nodes in groups.items():
        count = f" x{len(nodes)}" if len(nodes) > 1 else ""
        named = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        lines.append(f"  {op}{count} on {device}: {reason} [{named}]")
    return lines


def execute(exe: Any, values: dict[str, Any], repeat: int, show: bool) -> dict[str, Any]:
    """First forward (compiling every subgraph), then repeat timed ones."""
    with Progress("compiling and first forward", 1 + repeat, show) as bar:
        start = time.perf_counter()
        outputs = [output.asnumpy() for output in exe.forward(**values)]
        first = time.perf_counter() - start
        bar.advance(label="running")
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            for output in exe.forward(**values):
                output.wait_to_read()
            times.append(time.perf_counter() - start)
            bar.advance()
    subgraphs = exe.subgraphs + body_subgraphs(exe)
    return {"outputs": outputs, "first_forward_s": first,
            "compile_s": sum(operator.load_seconds for operator in subgraphs),
            "compiled_from": sorted({operator.load_source for operator in subgraphs
                                     if operator.load_source}),
            "run_median_s": statistics.median(times) if times else None,
            "run_min_s": min(times) if times else None, "repeat": repeat}


#: The phases of a first inference, in order (docs/performance.md, "First
#: inference"); translate is the ONNX import's (absent for checkpoints).
PHASES = ("import", "read", "translate", "shape_inference", "partition", "bind_other",
          "load_model", "first_run")


def startup_phases(kind: str, times: dict[str, float], bind_other_s: float,
                   timing: dict[str, Any]) -> dict[str, float]:
    """Seconds of each phase up to the first forward's outputs, which never
    overlap: import (``import acc_host``), read (the model's files),
    translate (ONNX to a symbol, weights to arrays), shape_inference and
    partition (of the bind), bind_other (the rest of the bind: the plan,
    weights onto the device, outputs), load_model (compiling or loading
    every subgraph, in the first forward) and first_run (the rest of the
    first forward); total is their sum. times: the recorded phases;
    bind_other_s: the bind's seconds outside them."""
    from .. import phases as phase_clock

    result = {"import_s": phase_clock.import_seconds or 0.0,
              "read_s": times.get("read", 0.0)}
    if kind == "onnx":
        result["translate_s"] = times.get("translate", 0.0)
    result.update({
        "shape_inference_s": times.get("shape_inference", 0.0),
        "partition_s": times.get("partition", 0.0),
        "bind_other_s": max(0.0, bind_other_s),
        "load_model_s": timing["compile_s"],
        "first_run_s": max(0.0, timing["first_forward_s"] - timing["compile_s"]),
    })
    result["total_s"] = sum(result.values())
    return result


def run(args: argparse.Namespace) -> int:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from .. import limits
    from .models import bind
    from .summary import summarize

    if args.repeat < 0:
        raise CliError("--repeat must be at least 0", USAGE)
    if args.trace:
        from ..trace import start as start_trace

        start_trace(args.trace)
    with recording() as times:
        model, ctx, values = prepare(args)
        show = enabled(args.progress)
        before = sum(times.values())
        start = time.perf_counter()
        exe = bind(model, ctx)
        bind_s = time.perf_counter() - start
        inside_bind = sum(times.values()) - before  # its shape inference and partition
    memory = exe.memory_report()
    checked = None
    try:
        timing = execute(exe, values, args.repeat, show)
        phases = startup_phases(model.kind, times, bind_s - inside_bind, timing)
        where = _where(exe, ctx)
        if args.check:
            from ..differential import check

            checked = check(exe, **values)
    finally:
        exe.close()
        if args.trace:
            from ..trace import stop as stop_trace

            stop_trace()
    outputs = [summarize(name, array) for name, array in
               zip(model.symbol.list_outputs(), timing.pop("outputs"))]
    report = {"model": model.source, "format": model.kind,
              "inputs": {name: {"shape": list(model.shapes[name]),
                                "dtype": str(model.dtypes[name])} for name in model.data_names},
              "where": where, "bind_s": bind_s, **timing, "phases": phases, "outputs": outputs,
              "memory": {**memory, "limit": limits.limit()}}
    if checked is not None:
        report["check"] = {"subgraphs": checked.subgraphs_checked,
                           "outputs": checked.outputs_checked,
                           "mismatches": [str(mismatch) for mismatch in checked.mismatches]}
    text = _format(report) + (f"\n{checked.format_text()}" if checked is not None else "")
    print(json.dumps(report, indent=2) if args.json else text)
    return FAILURE if checked is not None and not checked.ok else OK


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


def _format(report: dict[str, Any]) -> str:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from .summary import format_summary

    where = report["where"]
    inputs = ", ".join(f"{name} {'x'.join(map(str, info['shape']))} {info['dtype']}"
                       for name, info in report["inputs"].items())
    lines = [f"{report['model']} ({report['format']}) on {where['context']}; inputs: {inputs}",
             "outputs:", *(format_summary(info) for info in report["outputs"]),
             f"where: {where['offloaded']}/{where['operators']} operators on "
             f"{where['context']} in {where['subgraphs']} subgraph(s), {where['on_cpu']} on "
             "cpu(0)", *(f"  {line}" for line in where["partition"])]
    if where.get("refused"):
        lines.append(f"  not offloaded: {where['refused']}")
    if where["declined"]:
        lines.append("declined by the plugin:")
        lines += _declined_lines(where["declined"])
    source = f" ({', '.join(report['compiled_from'])})" if report["compiled_from"] else ""
    lines += [f"times: bind + partition {_ms(report['bind_s'])}, compile "
              f"{_ms(report['compile_s'])}{source}, first forward "
              f"{_ms(report['first_forward_s'])}",
              f"       forward median {_ms(report['run_median_s'])}, min "
              f"{_ms(report['run_min_s'])} over {report['repeat']} runs"]
    return "\n".join(lines)
