"""Building and running the C test programs of tests/c/ under the
sanitizers (AddressSanitizer with leak detection, UndefinedBehaviorSanitizer;
ThreadSanitizer for the programs that ask for it)."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .paths import ROOT

# CR_SCRATCH_POISON: as in build_plugins.SANITIZE_FLAGS (cpu_ref's scratch
# memory handed out filled with NaNs).
SANITIZE_FLAGS = ["-g", "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                  "-fno-sanitize-recover=undefined", "-DCR_SCRATCH_POISON"]
BASE_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread"]


CPU_REF = ROOT / "plugins" / "cpu_ref"


def _relative(paths: Sequence[Path]) -> list[str]:
    return [str(path.relative_to(ROOT)) for path in paths]


def cpu_ref_kernel_sources() -> list[str]:
    """The sources of cpu_ref's kernels (plugins/cpu_ref/kernels/, reference
    and fast), which need nothing else of the plugin."""
    return _relative(sorted((CPU_REF / "kernels").rglob("*.c")))


def cpu_ref_sources() -> list[str]:
    """All of cpu_ref's sources and those of plugins/common."""
    return _relative([*sorted(CPU_REF.rglob("*.c")),
                      *sorted((ROOT / "plugins" / "common").glob("*.c"))])


def cpu_ref_includes() -> list[str]:
    """The include directories a program compiled with cpu_ref's sources
    needs: the ABI header's, plugins/common and every folder of cpu_ref that
    holds headers (as build_plugins.plugin_include_dirs lists them)."""
    folders = sorted({header.parent for header in CPU_REF.rglob("*.h")} - {CPU_REF})
    return ["include", "plugins/common", *_relative([CPU_REF, *folders])]


def compiler() -> str:
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        pytest.skip("no C compiler on PATH")
    return found


def sanitizer_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the program links its own sanitizer runtime
    env["ASAN_OPTIONS"] = "detect_leaks=1"
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    env["TSAN_OPTIONS"] = "halt_on_error=1"  # a data race fails the program
    return env


# Object files compiled in this session, by a digest of everything that
# goes into them (compile_object): several programs link the same plugin
# sources with the same flags, and compiling them once, on every core, saves
# minutes of the suite.
_OBJECTS = Path(tempfile.mkdtemp(prefix="acc-host-c-objects-"))
atexit.register(shutil.rmtree, _OBJECTS, ignore_errors=True)


def _header_digest(directories: Sequence[Path]) -> bytes:
    """The digest of every header in directories (what a source may include)."""
    digest = hashlib.sha256()
    for directory in directories:
        for header in sorted(directory.glob("*.h")):
            digest.update(str(header).encode() + b"\0" + header.read_bytes())
    return digest.digest()


def compile_object(source: Path, flags: Sequence[str], include_dirs: Sequence[Path],
                   headers: bytes) -> Path:
    """source compiled with flags into this session's object cache; reused
    when the compiler, flags, include directories, source and headers (the
    _header_digest of its directory and the include directories) are the
    same."""
    key = hashlib.sha256()
    for part in (compiler(), *flags, *map(str, include_dirs), str(source)):
        key.update(part.encode() + b"\0")
    key.update(source.read_bytes())
    key.update(headers)
    obj = _OBJECTS / f"{source.stem}-{key.hexdigest()[:24]}.o"
    if not obj.exists():
        partial = obj.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        command = [compiler(), *flags, *(f"-I{path}" for path in include_dirs), "-c",
                   str(source), "-o", str(partial)]
        built = subprocess.run(command, capture_output=True, text=True, env=sanitizer_env())
        assert built.returncode == 0, (f"build of {source.name} failed:\n"
                                       f"{built.stdout}{built.stderr}")
        partial.replace(obj)
    return obj


def build_and_run(sources: Sequence[str], output: Path, include_dirs: Sequence[str],
                  extra_flags: Sequence[str] = (), sanitize: bool = True,
                  env: dict[str, str] | None = None) -> str:
    """Compiles sources (relative to the repository) with the sanitizers
    (without them when sanitize is false: instrumented memory accesses keep
    GCC from vectorising loops), runs the program, asserts it succeeded and
    printed "0 failed"; returns its output. The sources compile one object
    each, on every core, reusing this session's objects (compile_object);
    env adds variables to the program's environment."""
    flags = [*BASE_FLAGS, *(SANITIZE_FLAGS if sanitize else ()), *extra_flags]
    includes = [ROOT / path for path in include_dirs]
    paths = [ROOT / source for source in sources]
    headers = {parent: _header_digest([parent, *includes])
               for parent in {path.parent for path in paths}}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objects = list(pool.map(
            lambda path: compile_object(path, flags, includes, headers[path.parent]), paths))
    command = [compiler(), *flags, *map(str, objects), "-o", str(output), "-lm"]
    built = subprocess.run(command, capture_output=True, text=True, env=sanitizer_env())
    assert built.returncode == 0, f"link failed:\n{built.stdout}{built.stderr}"
    result = subprocess.run([str(output)], capture_output=True, text=True, timeout=600,
                            env={**sanitizer_env(), **(env or {})}, cwd=output.parent)
    report = result.stdout + result.stderr
    assert result.returncode == 0, f"{output.name} exited with {result.returncode}:\n{report}"
    assert " 0 failed" in result.stdout, report
    return report
