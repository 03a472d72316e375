#!/usr/bin/env python3
"""Builds and runs acc-host's fuzz targets (docs/fuzzing.md).

    python3 fuzz/run.py run --seconds 60          # every target, 60 s each, one after another
    python3 fuzz/run.py run --seconds 20 graph_json onnx
    python3 fuzz/run.py replay                    # the committed corpus and regressions, once
    python3 fuzz/run.py build                     # the C harnesses only
    python3 fuzz/run.py list

Targets (fuzz/corpus/<target>/ holds the seeds, fuzz/regressions/<target>/
the inputs of bugs found and fixed):

    graph_json     C, libFuzzer: plugins/common json.c + graph.c + attrs.c
    mlu_model      C, libFuzzer: mlu_sim's offline-model loader (import, infer, export, unload)
    cpu_ref_model  C, libFuzzer: cpu_ref's model-file loader (the same)
    params         Python: acc_host.ndarray.params_file (.params)
    symbol_json    Python: mx.sym.load_json / mx.sym.load
    onnx           Python: mx.onnx.import_model

C targets are built with clang's libFuzzer, AddressSanitizer (leak checking
included) and UndefinedBehaviorSanitizer into fuzz/build/. Python targets run
under atheris when it is installed (coverage-guided), else under the small
mutational driver of fuzz/python/harness.py. Every target runs with a limit
per input (-timeout) and on memory (C: -rss_limit_mb and -malloc_limit_mb;
Python: an address-space limit). New corpus entries go to fuzz/work/<target>/
(kept between runs), crash files to fuzz/artifacts/<target>/. The exit status
is 1 when any target crashed, hung or failed to run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
BUILD = FUZZ / "build"
WORK = FUZZ / "work"
ARTIFACTS = FUZZ / "artifacts"

C_FLAGS = ["-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=fuzzer,address,undefined",
           "-fno-sanitize-recover=undefined", "-std=c11", "-pthread", "-Wall", "-Wextra",
           "-Werror"]
TIMEOUT_S = 10          # per input
RSS_LIMIT_MB = 2048     # C targets: the whole process
MALLOC_LIMIT_MB = 512   # C targets: one allocation


@dataclass
class Target:
    name: str
    kind: str                      # "c" or "python"
    harness: str                   # under fuzz/c or fuzz/python
    max_len: int
    plugin: str | None = None      # C: the plugin directory compiled in
    dictionary: str | None = None  # a libFuzzer dictionary under fuzz/ (the mutational
                                   # driver ignores it)
    # C: sources compiled at -O0 (clang takes minutes over cpu_ref's GEMM
    # kernels at -O1 with the sanitizers; the fuzz inputs' matrices are tiny)
    unoptimized: tuple[str, ...] = ()
    what: str = ""


TARGETS = {t.name: t for t in [
    Target("graph_json", "c", "graph_json_fuzz.c", 65536, dictionary="graph_json.dict",
           what="plugins/common: acc_json_parse, acc_graph_parse, attrs.h parsers"),
    Target("mlu_model", "c", "mlu_model_fuzz.c", 32768, plugin="mlu_sim",
           dictionary="graph_json.dict",
           what="mlu_sim: configure import_model, then infer, export_model, unloadModel"),
    Target("cpu_ref_model", "c", "cpu_ref_model_fuzz.c", 32768, plugin="cpu_ref",
           dictionary="graph_json.dict", unoptimized=("gemm.c",),
           what="cpu_ref: configure import_model, then infer, export_model, unloadModel"),
    Target("params", "python", "params_fuzz.py", 4096,
           what="acc_host.ndarray.params_file.loads, mx.model.load_params"),
    Target("symbol_json", "python", "symbol_json_fuzz.py", 65536, dictionary="graph_json.dict",
           what="mx.sym.load_json, mx.sym.load"),
    Target("onnx", "python", "onnx_fuzz.py", 4096, what="mx.onnx.import_model"),
]}


# ---- building ---------------------------------------------------------------------------------


class BuildError(RuntimeError):
    pass


def compiler() -> str:
    return os.environ.get("FUZZ_CC") or shutil.which("clang") or "clang"


def libfuzzer_available() -> str | None:
    """None when clang links -fsanitize=fuzzer here, else why not."""
    cc = compiler()
    if shutil.which(cc) is None:
        return f"{cc} not found (set FUZZ_CC to a clang with libFuzzer)"
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "probe.c"
        source.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                          "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) "
                          "{ (void)d; (void)n; return 0; }\n")
        result = subprocess.run([cc, "-fsanitize=fuzzer,address,undefined", str(source), "-o",
                                 str(Path(folder) / "probe")], capture_output=True, text=True)
    if result.returncode != 0:
        return f"{cc} cannot link -fsanitize=fuzzer: {result.stderr.strip()[-300:]}"
    return None


def _c_sources(target: Target) -> tuple[list[Path], list[Path]]:
    """(sources, include directories) of a C target."""
    common = ROOT / "plugins" / "common"
    sources = [FUZZ / "c" / target.harness, *sorted(common.glob("*.c"))]
    includes = [ROOT / "include", common, FUZZ / "c"]
    if target.plugin:
        plugin = ROOT / "plugins" / target.plugin
        sources += sorted(plugin.rglob("*.c"))
        # Every folder of the plugin that holds headers (build_plugins.plugin_include_dirs).
        includes += [plugin, *sorted({h.parent for h in plugin.rglob("*.h")} - {plugin})]
    return sources, includes


def binary(target: Target) -> Path:
    return BUILD / target.name


def _fresh(output: Path, inputs: list[Path]) -> bool:
    return output.exists() and all(p.stat().st_mtime <= output.stat().st_mtime for p in inputs)


def _compile(command: list[str]) -> str | None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return f"{' '.join(command)}\n{result.stdout}{result.stderr}"
    return None


def build(target: Target, force: bool = False, log=print) -> Path:
    """Compiles a C target into fuzz/build/<name>: one object per source
    (fuzz/build/obj/<name>/, recompiled when it or a header changed), on
    every core, then the link."""
    from concurrent.futures import ThreadPoolExecutor

    sources, includes = _c_sources(target)
    output = binary(target)
    headers = [h for d in includes for h in d.glob("*.h")]
    objects_dir = BUILD / "obj" / target.name
    objects_dir.mkdir(parents=True, exist_ok=True)
    flags = [compiler(), *C_FLAGS, *(f"-I{d}" for d in includes)]
    jobs, objects = [], []
    for source in sources:
        obj = objects_dir / f"{'_'.join(source.relative_to(ROOT).with_suffix('').parts)}.o"
        objects.append(obj)
        if force or not _fresh(obj, [source, *headers, Path(__file__)]):
            extra = ["-O0"] if source.name in target.unoptimized else []
            jobs.append([*flags, *extra, "-c", str(source), "-o", str(obj)])
    if not jobs and _fresh(output, objects):
        return output
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        errors = [error for error in pool.map(_compile, jobs) if error]
    if errors:
        raise BuildError(f"building {target.name} failed:\n{errors[0]}")
    error = _compile([*flags, *map(str, objects), "-o", str(output), "-lm"])
    if error:
        raise BuildError(f"linking {target.name} failed:\n{error}")
    log(f"built fuzz/build/{target.name} in {time.monotonic() - started:.0f} s "
        f"({len(jobs)} of {len(sources)} sources compiled)")
    return output


# ---- running ----------------------------------------------------------------------------------


@dataclass
class Result:
    target: str
    seconds: float
    returncode: int
    executions: int | None = None
    exec_per_s: int | None = None
    cov: int | None = None
    edges: int | None = None       # instrumented edges (libFuzzer's inline 8-bit counters)
    ft: int | None = None
    corpus_files: int | None = None
    corpus_size: str | None = None
    new_units: int | None = None
    peak_rss_mb: int | None = None
    driver: str = ""
    artifacts: list[str] = field(default_factory=list)
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.artifacts


_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)
_COUNTERS = re.compile(r"\((\d+) inline 8-bit counters\)")
_PROGRESS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)")


def parse_log(text: str, result: Result) -> None:
    stats = {key: int(value) for key, value in _STAT.findall(text)}
    result.executions = stats.get("number_of_executed_units")
    result.exec_per_s = stats.get("average_exec_per_sec")
    result.new_units = stats.get("new_units_added")
    result.peak_rss_mb = stats.get("peak_rss_mb")
    counters = _COUNTERS.findall(text)
    if counters:
        result.edges = sum(int(count) for count in counters)
    progress = _PROGRESS.findall(text)
    if progress:
        _, cov, ft, files, size = progress[-1]
        result.cov, result.ft, result.corpus_files = int(cov), int(ft), int(files)
        result.corpus_size = size


def python_env() -> dict[str, str]:
    """The environment of a Python target: this tree's acc_host, no plugins
    (the readers need none; mlu_sim's simulated DRAM would defeat the
    address-space limit), one thread per library."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [
        env.get("PYTHONPATH")])])
    # The host's own limit on arrays made for declared shapes, well inside
    # the address-space limit (harness.py), which catches what bypasses it.
    env.setdefault("MXNET_ACC_MAX_ALLOC_BYTES", str(256 << 20))
    env.update(MXNET_ACC_BUNDLED="0", MXNET_ACC_ENTRY_POINTS="0", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    for name in ("MXNET_ACC_LIBRARIES", "MXNET_ACC_TRACE", "MXNET_ACC_CACHE_DIR"):
        env.pop(name, None)
    return env


def c_env(tmp: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(TMPDIR=tmp, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    return env


def driver_name(target: Target) -> str:
    if target.kind == "c":
        return "libFuzzer"
    if os.environ.get("ACC_FUZZ_DRIVER") == "mutate":
        return "mutate"
    try:
        import importlib.util
        return "atheris" if importlib.util.find_spec("atheris") else "mutate"
    except (ImportError, ValueError):
        return "mutate"


def corpus_dirs(target: Target) -> list[Path]:
    return [d for d in (FUZZ / "corpus" / target.name, FUZZ / "regressions" / target.name)
            if d.is_dir()]


def _run_fresh(command: list[str], env: dict[str, str], cwd: str,
               timeout: float) -> tuple[int, str]:
    """Runs command with its output captured: (exit status, output).

    Linux carries a process's peak RSS across fork and exec: a fuzzer
    started straight from a large process (pytest late in a long session
    holds gigabytes) begins with its parent's peak, and libFuzzer's
    -rss_limit_mb, which reads that peak, stops it at once. A shell that
    forks the fuzzer (rather than exec-ing it) gives it its own small
    peak. The shell leads a process group of its own, so that a run past
    the timeout is killed whole."""
    shell = ["/bin/sh", "-c", '"$@"; exit $?', "sh", *command]
    with subprocess.Popen(shell, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", env=env, cwd=cwd,
                          start_new_session=True) as process:
        try:
            text, _ = process.communicate(timeout=timeout)
            return process.returncode, text
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            text, _ = process.communicate()
            return -9, (text or "") + "\n(killed: no end)"


def run(target: Target, seconds: float, *, replay: bool = False, work: Path | None = None,
        extra: list[str] | None = None, log=print) -> Result:
    """Fuzzes target for seconds (replay: runs the committed inputs once)."""
    artifacts = ARTIFACTS / target.name
    artifacts.mkdir(parents=True, exist_ok=True)
    before = set(artifacts.iterdir())
    options = [f"-timeout={TIMEOUT_S}", f"-max_len={target.max_len}", "-print_final_stats=1",
               f"-artifact_prefix={artifacts}/"]
    if replay:
        options.append("-runs=0")
        dirs = corpus_dirs(target)
    else:
        options.append(f"-max_total_time={int(seconds)}")
        work = work or WORK / target.name
        work.mkdir(parents=True, exist_ok=True)
        dirs = [work, *corpus_dirs(target)]  # new entries go to the first
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{target.name}-") as tmp:
        if target.kind == "c":
            command = [str(build(target, log=log))]
            options += [f"-rss_limit_mb={RSS_LIMIT_MB}", f"-malloc_limit_mb={MALLOC_LIMIT_MB}"]
            env = c_env(tmp)
        else:
            command = [sys.executable, str(FUZZ / "python" / target.harness)]
            env = python_env()
            env["TMPDIR"] = tmp
        if target.dictionary and not replay:
            options.append(f"-dict={FUZZ / target.dictionary}")
        command += [*options, *(extra or []), *map(str, dirs)]
        started = time.monotonic()
        returncode, text = _run_fresh(command, env, tmp, seconds + 300)
    result = Result(target.name, time.monotonic() - started, returncode,
                    driver=driver_name(target))
    parse_log(text, result)
    result.artifacts = sorted(str(p.relative_to(ROOT)) for p in set(artifacts.iterdir()) - before)
    if not result.ok:
        result.log_tail = "\n".join(line for line in text.splitlines()
                                    if not line.startswith("INFO: Instrumenting"))[-6000:]
    return result


def _fmt(value) -> str:
    return "-" if value is None else str(value)


def summary(results: list[Result]) -> str:
    header = ("target", "driver", "seconds", "executions", "exec/s", "cov/edges", "ft", "corpus",
              "result")
    rows = [header]
    for r in results:
        corpus = f"{r.corpus_files}/{r.corpus_size}" if r.corpus_files is not None else "-"
        cov = f"{r.cov}/{r.edges}" if r.cov is not None and r.edges else _fmt(r.cov)
        rows.append((r.target, r.driver, f"{r.seconds:.0f}", _fmt(r.executions),
                     _fmt(r.exec_per_s), cov, _fmt(r.ft), corpus,
                     "ok" if r.ok else f"FAILED (exit {r.returncode}) {' '.join(r.artifacts)}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="run",
                        choices=["run", "replay", "build", "list"])
    parser.add_argument("targets", nargs="*", help="default: all")
    parser.add_argument("--seconds", type=float, default=30, help="per target (run)")
    parser.add_argument("--force", action="store_true", help="rebuild the C targets")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--work", type=Path, default=WORK,
                        help="where the growing corpora go, one folder per target "
                             "(default: fuzz/work)")
    args = parser.parse_intermixed_args(argv)
    unknown = [name for name in args.targets if name not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; choose from {list(TARGETS)}")
    targets = [TARGETS[name] for name in args.targets or TARGETS]
    if args.command == "list":
        for t in targets:
            print(f"{t.name:14} {t.kind:7} {t.what}")
        return 0
    if any(t.kind == "c" for t in targets):
        problem = libfuzzer_available()
        if problem is not None:
            print(f"cannot build the C targets: {problem}", file=sys.stderr)
            return 1
        try:
            for t in targets:
                if t.kind == "c":
                    build(t, force=args.force)
        except BuildError as error:
            print(error, file=sys.stderr)
            return 1
    if args.command == "build":
        return 0
    results = []
    for t in targets:
        result = run(t, args.seconds, replay=args.command == "replay", work=args.work / t.name)
        results.append(result)
        if not result.ok:
            print(f"== {t.name}: FAILED\n{result.log_tail}", file=sys.stderr)
    print(summary(results))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
