"""What the Python fuzz targets share: the rule for what an input may do,
the resource limits, and the two drivers.

A target module defines ``check(data: bytes) -> None``: it feeds the bytes to
an acc_host reader and returns when the reader succeeded (after checking
what it returned) or raised one of the errors the reader documents (the
``acc_host.errors`` hierarchy). Any other exception escapes ``check`` and is
a bug: a crash for the driver. So are a hang (longer than the per-input
timeout) and an allocation the address-space limit refuses (a
``MemoryError``: the reader asked for memory the input could not justify).

Drivers, picked by ``main``:

* atheris (``pip install atheris``): coverage-guided, libFuzzer's engine and
  statistics; acc_host's modules are instrumented when imported inside
  ``instrumented()``.
* otherwise a small mutational driver of this file (``--driver=mutate``
  forces it): random byte-level mutations of the corpus, no coverage
  feedback. Same options, same crash files, same final statistics lines.

Run a target through fuzz/run.py, which sets the environment (no plugins are
loaded: these readers need none, and mlu_sim's simulated DRAM would defeat
the address-space limit) and passes libFuzzer-style options.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import resource
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: Address space a target may use beyond what it holds after its imports.
HEADROOM_BYTES = 1 << 30
#: Seconds one input may take.
TIMEOUT_S = 10


#: Bugs the fuzzers found outside the code this directory's owners may change,
#: reported to its owners and open: (exception type, source file, function)
#: of a frame of the traceback. A target that meets one returns as if the
#: input were refused (so that a bounded run goes on finding others) unless
#: ACC_FUZZ_STRICT=1. docs/fuzzing.md lists them.
KNOWN_OPEN: list[tuple[str, str, str]] = [
    # None open. Both earlier entries (mx.nd.Pooling of an empty spatial
    # axis; the _onnx_* shape probes on declared shapes of terabytes or of
    # too many dimensions) are fixed; their inputs are regressions.
]


def known_open(error: BaseException) -> bool:
    """Whether error is one of KNOWN_OPEN (and ACC_FUZZ_STRICT is not set)."""
    if os.environ.get("ACC_FUZZ_STRICT") == "1":
        return False
    import traceback
    frames = traceback.extract_tb(error.__traceback__)
    return any(type(error).__name__ == kind and frame.filename.endswith(path)
               and frame.name == function
               for kind, path, function in KNOWN_OPEN for frame in frames)


def _vm_size() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def limit_memory(headroom: int = HEADROOM_BYTES) -> None:
    """Caps the address space at what the process maps now plus headroom, so
    that an unbounded allocation fails (MemoryError) instead of swapping."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_size() + headroom
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _atheris():
    if os.environ.get("ACC_FUZZ_DRIVER") == "mutate":
        return None
    try:
        import atheris
    except ImportError:
        return None
    return atheris


@contextlib.contextmanager
def instrumented() -> Iterator[None]:
    """Imports made inside are instrumented for coverage when atheris runs
    the target (acc_host's modules only: the readers under test)."""
    atheris = _atheris()
    if atheris is None or "pytest" in sys.modules:
        yield
        return
    with atheris.instrument_imports(include=["acc_host"]):
        yield


# ---- the mutational driver ------------------------------------------------------------------

_INTERESTING = [0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


def mutate(data: bytes, rng: random.Random, corpus: list[bytes], max_len: int) -> bytes:
    """One to four byte-level mutations of data: bit flips, byte sets,
    inserts, deletes, duplicated chunks, splices with another input and
    little-endian integers overwritten with boundary values."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(7)
        pos = rng.randrange(len(out) + 1)
        if kind == 0 and out:
            pos = min(pos, len(out) - 1)
            out[pos] ^= 1 << rng.randrange(8)
        elif kind == 1 and out:
            out[min(pos, len(out) - 1)] = rng.randrange(256)
        elif kind == 2:
            out[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == 3 and out:
            del out[pos:pos + rng.randint(1, 16)]
        elif kind == 4 and out:
            start = rng.randrange(len(out))
            chunk = out[start:start + rng.randint(1, 64)]
            out[pos:pos] = chunk * rng.randint(1, 4)
        elif kind == 5 and corpus:
            other = rng.choice(corpus)
            cut = rng.randrange(len(other) + 1)
            out = out[:pos] + other[cut:]
        else:
            width = rng.choice((1, 2, 4, 8))
            value = rng.choice(_INTERESTING) & ((1 << (8 * width)) - 1)
            field = struct.pack("<Q", value)[:width]
            pos = min(pos, max(len(out) - width, 0))
            out[pos:pos + width] = field
    return bytes(out[:max_len])


def _read_corpus(paths: list[str]) -> list[bytes]:
    inputs = []
    for name in paths:
        path = Path(name)
        files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
        inputs.extend(p.read_bytes() for p in files)
    return inputs


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout()


def _parse_options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    options, paths = {}, []
    for arg in argv:
        if arg.startswith("-") and "=" in arg:
            key, _, value = arg.lstrip("-").partition("=")
            options[key] = value
        else:
            paths.append(arg)
    return options, paths


def _mutate_main(check: Callable[[bytes], None], argv: list[str]) -> int:
    options, paths = _parse_options(argv)
    seconds = float(options.get("max_total_time", 0) or 0)
    runs = int(options.get("runs", -1))
    max_len = int(options.get("max_len", 65536))
    timeout = int(options.get("timeout", TIMEOUT_S))
    prefix = options.get("artifact_prefix", "./")
    rng = random.Random(int(options.get("seed", 0)) or None)
    corpus = _read_corpus(paths) or [b""]
    if paths and Path(paths[0]).is_file():
        seconds, runs = 0, 0  # files given: run them once each, as libFuzzer does
    signal.signal(signal.SIGALRM, _alarm)
    start = time.monotonic()
    executed = 0
    queue = list(corpus)
    print(f"INFO: mutational driver (atheris not installed); {len(corpus)} inputs",
          file=sys.stderr)
    while True:
        if queue:
            data = queue.pop(0)
        elif (runs >= 0 and executed >= runs + len(corpus)) or \
                (runs < 0 and time.monotonic() - start >= seconds):
            break
        else:
            data = mutate(rng.choice(corpus), rng, corpus, max_len)
        signal.alarm(timeout)
        try:
            check(data)
        except _Timeout:
            return _crash(prefix, "timeout", data, f"ALARM: an input took over {timeout} s")
        except BaseException as error:  # noqa: BLE001 (every escape is the finding)
            signal.alarm(0)
            import traceback
            traceback.print_exc()
            return _crash(prefix, "crash", data, f"uncaught {type(error).__name__}: {error}")
        finally:
            signal.alarm(0)
        executed += 1
    elapsed = max(time.monotonic() - start, 1e-9)
    print(f"Done {executed} runs in {int(elapsed)} second(s)", file=sys.stderr)
    print(f"stat::number_of_executed_units: {executed}", file=sys.stderr)
    print(f"stat::average_exec_per_sec:     {int(executed / elapsed)}", file=sys.stderr)
    print("stat::new_units_added:          0", file=sys.stderr)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"stat::peak_rss_mb:              {rss}", file=sys.stderr)
    return 0


def _crash(prefix: str, kind: str, data: bytes, message: str) -> int:
    path = f"{prefix}{kind}-{hashlib.sha1(data).hexdigest()}"
    Path(path).write_bytes(data)
    print(f"==ERROR: {message}\nTest unit written to {path}", file=sys.stderr)
    return 1


def main(check: Callable[[bytes], None], argv: list[str] | None = None) -> int:
    """Runs the target with libFuzzer-style arguments (``-max_total_time=N
    -timeout=S -max_len=N -runs=N -artifact_prefix=DIR/ CORPUS_DIR...``)."""
    argv = list(sys.argv if argv is None else argv)
    limit_memory()
    atheris = _atheris()
    if atheris is None:
        return _mutate_main(check, argv[1:])
    atheris.Setup(argv, check)
    atheris.Fuzz()
    return 0
