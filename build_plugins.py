#!/usr/bin/env python3
"""Build the C accelerator plugins of acc-host into shared libraries.

Every directory ``plugins/<name>/`` holding ``.c`` files (in it or in its
folders, at any depth) becomes ``lib<name>.so`` (``.dylib`` on macOS),
compiled together with the shared sources of ``plugins/common/`` against
``include/mxnet_acc.h``, except the directories in NOT_BUNDLED
(``plugins/template``, the plugin to copy), which are built only on request:
``--plugin NAME --out DIR``. A plugin's sources include its headers by name
alone: every folder of the plugin that holds headers is on the include path
(plugin_include_dirs), and a header name may occur once per plugin. The libraries,
a copy of the header and, in ``sdk/``, a copy of ``plugins/common/`` (the C
helpers a plugin built outside this tree compiles in: ``acc-host sdk``) go to
``src/acc_host/_bundled/``, where the installed package finds them
(``pip install .`` and ``pip install -e .`` run this script through
``setup.py``).

Usage::

    python build_plugins.py [--out DIR] [--sanitize] [--werror] [--force]
    python build_plugins.py --plugin template --out build/template [--werror]

Shipped builds are optimised (-O2, with GCC's loop vectoriser allowed to
version loops for aliasing: ``-fvect-cost-model=dynamic``, which makes the
kernels' element-wise inner loops SIMD; without ``-ffast-math`` nothing is
reassociated, so results are bit-identical to scalar code; loops aligned to
32 bytes, see GCC_RELEASE_FLAGS) with warnings on
and no ``-march=native``, so the libraries run on any CPU of the target
architecture.

Compilers and platforms: GCC or Clang on Linux (glibc or musl) and Clang on
macOS, where the libraries are built with ``-dynamiclib`` for the
architectures named by ``$ARCHFLAGS`` (``-arch x86_64``, as cibuildwheel
sets it when it cross-builds). A library is rebuilt whenever its compile
command or the compiler's target changes, so one source tree can build
wheels for several architectures in turn.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
INCLUDE_DIR = ROOT / "include"
HEADER = INCLUDE_DIR / "mxnet_acc.h"
PLUGINS_DIR = ROOT / "plugins"
COMMON_DIR = PLUGINS_DIR / "common"
DEFAULT_OUT = ROOT / "src" / "acc_host" / "_bundled"
SDK_DIR = "sdk"  # under the output directory: the copy of plugins/common
# Plugin directories that are not bundled: every library in _bundled/ ships
# in the wheel and is loaded at `import acc_host`, and the template (a
# starting point for vendors, plugins/template/README.md) would add an
# accelerator to every session, to the demo and to every test that lists
# the loaded ones. They are built with --plugin NAME into another directory.
NOT_BUNDLED = frozenset({"template"})

SHARED_SUFFIX = ".dylib" if sys.platform == "darwin" else ".so"

BASE_FLAGS = ["-std=c11", "-fPIC", "-pthread", "-Wall", "-Wextra", "-fvisibility=hidden"]
RELEASE_FLAGS = ["-O2"]
# Clang has no -fvect-cost-model (and warns). -falign-loops=32 starts each
# loop on a 32-byte boundary: the kernels' speed then no longer depends on
# where the linker happens to place them (the same convolution took 15%
# longer in one link order than another), and a forward of resnet_small
# ran 13% faster in the EPYC's slow phases (medians of 8 alternated rounds
# against the unaligned build; docs/cpu_ref_performance.md, "Run-time dispatch
# and build flags").
GCC_RELEASE_FLAGS = ["-fvect-cost-model=dynamic", "-falign-loops=32"]
# CR_SCRATCH_POISON: cpu_ref fills its reused scratch memory with NaNs each
# time it hands it out (plugins/cpu_ref/scratch.c), so reading scratch a
# kernel did not write shows in the sanitized test runs.
SANITIZE_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                  "-DCR_SCRATCH_POISON"]
LIBS = ["-lm"]


class BuildError(RuntimeError):
    """A plugin failed to compile; the message holds the compiler's output."""


def compiler() -> str:
    """The C compiler: $CC, else cc/gcc/clang, whichever is found first."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    raise BuildError("no C compiler found: install gcc or clang, or set CC")


@functools.cache
def _predefined_macros(cc: str) -> frozenset[str]:
    """Names of the macros cc predefines (``__clang__``, ``__APPLE__``, ...)."""
    result = subprocess.run([cc, "-dM", "-E", "-x", "c", os.devnull], capture_output=True,
                            text=True, check=False)
    return frozenset(line.split()[1] for line in result.stdout.splitlines()
                     if line.startswith("#define "))


def is_clang(cc: str) -> bool:
    return "__clang__" in _predefined_macros(cc)


@functools.cache
def target_triple(cc: str) -> str:
    """What cc builds for (``x86_64-linux-gnu``, ``x86_64-alpine-linux-musl``,
    ``arm64-apple-darwin23``): part of the recipe, so that a library built
    for another target is never taken as up to date."""
    result = subprocess.run([cc, "-dumpmachine"], capture_output=True, text=True, check=False)
    return result.stdout.strip() or "unknown"


def platform_flags(output: Path) -> list[str]:
    """The flags that make output a shared library on this platform: on
    macOS a dylib for the architectures of $ARCHFLAGS (the compiler's own
    when unset), where undefined symbols are link errors by default."""
    if sys.platform == "darwin":
        return ["-dynamiclib", f"-Wl,-install_name,@rpath/{output.name}",
                *os.environ.get("ARCHFLAGS", "").split()]
    return ["-shared"]


def library_name(plugin: str) -> str:
    return f"lib{plugin}{SHARED_SUFFIX}"


def plugin_dirs(*, bundled_only: bool = True) -> list[Path]:
    """Plugin source directories that hold C sources (at any depth), in name
    order; those of NOT_BUNDLED only with bundled_only=False."""
    return sorted(
        path for path in PLUGINS_DIR.iterdir()
        if path.is_dir() and path != COMMON_DIR and any(path.rglob("*.c"))
        and not (bundled_only and path.name in NOT_BUNDLED)
    )


def plugin_sources(source_dir: Path) -> list[Path]:
    """The C sources of a plugin: source_dir's and its folders', at any depth."""
    return sorted(source_dir.rglob("*.c"))


def plugin_headers(source_dir: Path) -> list[Path]:
    """The headers of a plugin, at any depth."""
    return sorted(source_dir.rglob("*.h"))


def plugin_include_dirs(source_dir: Path) -> list[Path]:
    """source_dir and each of its folders that holds headers: what a
    plugin's sources (and the tests and benchmarks that compile them) put
    on the include path. Raises BuildError when two headers of the plugin
    share a name, since an include by name would then pick one by the
    order of the directories."""
    seen: dict[str, Path] = {}
    for header in plugin_headers(source_dir):
        if header.name in seen:
            raise BuildError(f"{source_dir.name}: header name {header.name} is used twice "
                             f"({seen[header.name]} and {header})")
        seen[header.name] = header
    folders = {header.parent for header in seen.values()}
    return [source_dir, *sorted(folder for folder in folders if folder != source_dir)]


def compile_library(sources: Sequence[Path], output: Path, *, sanitize: bool = False,
                    werror: bool = False, include_dirs: Sequence[Path] = (),
                    extra_flags: Sequence[str] = ()) -> Path:
    """Compiles C sources into the shared library at output.

    Each source is compiled to an object on its own, as many at once as the
    machine has cores, and the objects are then linked: the same library
    compile_command's single command builds. This is also how the tests
    build their deliberately broken plugins.
    """
    compile_flags, link_flags = _flags(output, sanitize=sanitize, werror=werror,
                                       include_dirs=include_dirs, extra_flags=extra_flags)
    output.parent.mkdir(parents=True, exist_ok=True)
    if len(sources) <= 1:
        _run(_one_command(compile_flags, link_flags, sources, output), output)
        return output
    with tempfile.TemporaryDirectory(prefix=f"{output.stem}-objects-") as scratch:
        # Numbered, since two directories may hold sources of one name.
        objects = [Path(scratch) / f"{index}-{source.stem}.o"
                   for index, source in enumerate(sources)]
        # The largest sources first, so that the last one to finish is short.
        order = sorted(range(len(sources)), key=lambda i: -sources[i].stat().st_size)
        workers = min(len(sources), os.cpu_count() or 1)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            compiled = [pool.submit(_run, [*compile_flags, "-c", str(sources[i]),
                                           "-o", str(objects[i])], output) for i in order]
            for future in compiled:
                future.result()  # the first failure, in submission order
        _run([compile_flags[0], "-pthread", *link_flags, *map(str, objects), "-o", str(output),
              *LIBS], output)
    return output


def _run(command: Sequence[str], output: Path) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError(f"building {output.name} failed:\n{' '.join(command)}\n"
                         f"{result.stdout}{result.stderr}")


def _flags(output: Path, *, sanitize: bool, werror: bool, include_dirs: Sequence[Path],
           extra_flags: Sequence[str]) -> tuple[list[str], list[str]]:
    """The compiler with its flags for compiling a source to an object, and
    the flags that make objects the library output (linking only)."""
    cc = compiler()
    mode = SANITIZE_FLAGS if sanitize else (
        RELEASE_FLAGS + ([] if is_clang(cc) else GCC_RELEASE_FLAGS))
    includes = [f"-I{path}" for path in (INCLUDE_DIR, COMMON_DIR, *include_dirs)]
    # The architectures of $ARCHFLAGS (macOS) apply to the objects too.
    arch = os.environ.get("ARCHFLAGS", "").split() if sys.platform == "darwin" else []
    compile_flags = [cc, *BASE_FLAGS, *arch, *mode, *(["-Werror"] if werror else []),
                     *extra_flags, *includes]
    link_flags = [*platform_flags(output), *(["-fsanitize=address,undefined"] if sanitize else [])]
    if not sanitize and sys.platform.startswith("linux"):
        link_flags.append("-Wl,-z,defs")  # an unresolved symbol fails the build, not the dlopen
    return compile_flags, link_flags


def compile_command(sources: Sequence[Path], output: Path, *, sanitize: bool = False,
                    werror: bool = False, include_dirs: Sequence[Path] = (),
                    extra_flags: Sequence[str] = ()) -> list[str]:
    """One compiler command that builds the library compile_library builds
    (it is what a stamp records)."""
    compile_flags, link_flags = _flags(output, sanitize=sanitize, werror=werror,
                                       include_dirs=include_dirs, extra_flags=extra_flags)
    return _one_command(compile_flags, link_flags, sources, output)


def _one_command(compile_flags: Sequence[str], link_flags: Sequence[str],
                 sources: Sequence[Path], output: Path) -> list[str]:
    link_only = [flag for flag in link_flags if flag not in compile_flags]
    return [*compile_flags, *link_only, *map(str, sources), "-o", str(output), *LIBS]


def _relative_to_root(command: Sequence[str]) -> str:
    """The command with this tree's paths relative to it, so that a copy of
    the tree with its built libraries needs no rebuild."""
    root = f"{ROOT}{os.sep}"
    return " ".join(arg.replace(root, "") for arg in command)


def _is_fresh(output: Path, inputs: Sequence[Path]) -> bool:
    if not output.exists():
        return False
    built = output.stat().st_mtime
    return all(path.stat().st_mtime <= built for path in inputs)


def build_plugin(source_dir: Path, out_dir: Path, *, sanitize: bool = False,
                 werror: bool = False, force: bool = False) -> Path:
    """Builds one plugin directory with the common sources; skips it when
    the library is newer than every source and header it depends on."""
    sources = plugin_sources(source_dir) + sorted(COMMON_DIR.glob("*.c"))
    headers = [HEADER, *plugin_headers(source_dir), *COMMON_DIR.glob("*.h")]
    include_dirs = plugin_include_dirs(source_dir)
    output = out_dir / library_name(source_dir.name)
    # The stamp records how and for what the library was built, so that
    # switching between a release and a sanitizer build, or to another
    # compiler, target or architecture, always recompiles.
    stamp = output.with_suffix(".stamp")
    command = compile_command(sources, output, sanitize=sanitize, werror=werror,
                              include_dirs=include_dirs)
    recipe = f"target={target_triple(command[0])}\n{_relative_to_root(command)}\n"
    up_to_date = (_is_fresh(output, [*sources, *headers, Path(__file__)])
                  and stamp.exists() and stamp.read_text() == recipe)
    if up_to_date and not force:
        return output
    compile_library(sources, output, sanitize=sanitize, werror=werror,
                    include_dirs=include_dirs)
    stamp.write_text(recipe)
    return output


def _abi_header_module():
    """acc_host.abi.header loaded on its own (importing the acc_host package
    would load the plugins being built): it writes the pre-parsed cffi
    declarations (mxnet_acc.cffi) beside the header copy."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_acc_host_abi_header", ROOT / "src" / "acc_host" / "abi" / "header.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_sdk(out_dir: Path) -> Path:
    """Copies the header to out_dir and the C sources and headers of
    plugins/common to out_dir/sdk (removing files no longer there);
    returns the sdk directory."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HEADER, out_dir / HEADER.name)
    _abi_header_module().write_preparsed(out_dir, HEADER)
    sdk = out_dir / SDK_DIR
    sdk.mkdir(exist_ok=True)
    sources = {path.name: path for path in [*COMMON_DIR.glob("*.c"), *COMMON_DIR.glob("*.h")]}
    for stale in sdk.iterdir():
        if stale.name not in sources:
            stale.unlink()
    for name, path in sorted(sources.items()):
        shutil.copy2(path, sdk / name)
    return sdk


def build_all(out_dir: Path = DEFAULT_OUT, *, sanitize: bool = False, werror: bool = False,
              force: bool = False, log=print) -> list[Path]:
    """Builds every plugin into out_dir and copies the header and the SDK
    sources beside them (copy_sdk).

    In the package's own _bundled/ directory, libraries of plugins that no
    longer exist (or of another platform's suffix) are removed, since every
    library there ships in the wheel and is loaded at import."""
    copy_sdk(out_dir)
    built = []
    for source_dir in plugin_dirs():
        path = build_plugin(source_dir, out_dir, sanitize=sanitize, werror=werror, force=force)
        log(f"built {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        built.append(path)
    if out_dir.resolve() == DEFAULT_OUT.resolve():
        _remove_stale(out_dir, built, log)
    return built


def build_named(names: Sequence[str], out_dir: Path, *, sanitize: bool = False,
                werror: bool = False, force: bool = False, log=print) -> list[Path]:
    """Builds the plugins named (directories of plugins/, bundled or not)
    into out_dir. A plugin of NOT_BUNDLED never goes to the package's own
    _bundled/ directory, where it would be loaded at import."""
    dirs = {path.name: path for path in plugin_dirs(bundled_only=False)}
    built = []
    for name in names:
        if name not in dirs:
            raise BuildError(f"no plugin {name!r} in {PLUGINS_DIR} (there are: "
                             f"{', '.join(sorted(dirs))})")
        if name in NOT_BUNDLED and out_dir.resolve() == DEFAULT_OUT.resolve():
            raise BuildError(f"{name} is not bundled (NOT_BUNDLED): build it with --out DIR")
        path = build_plugin(dirs[name], out_dir, sanitize=sanitize, werror=werror, force=force)
        log(f"built {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        built.append(path)
    return built


def _remove_stale(out_dir: Path, built: Sequence[Path], log) -> None:
    keep = {path.name for path in built} | {path.with_suffix(".stamp").name for path in built}
    for path in out_dir.glob("lib*"):
        if path.suffix in (".so", ".dylib", ".stamp") and path.name not in keep:
            path.unlink()
            log(f"removed stale {path.name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"output directory (default: {DEFAULT_OUT.relative_to(ROOT)})")
    parser.add_argument("--sanitize", action="store_true",
                        help="build with AddressSanitizer and UndefinedBehaviorSanitizer")
    parser.add_argument("--werror", action="store_true", help="treat warnings as errors")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--plugin", action="append", metavar="NAME",
                        help="build only this plugin directory (repeatable), also one that is "
                             f"not bundled ({', '.join(sorted(NOT_BUNDLED))}: needs --out)")
    args = parser.parse_args(argv)
    try:
        if args.plugin:
            build_named(args.plugin, args.out, sanitize=args.sanitize, werror=args.werror,
                        force=args.force)
        else:
            build_all(args.out, sanitize=args.sanitize, werror=args.werror, force=args.force)
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
