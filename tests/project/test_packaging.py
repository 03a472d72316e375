"""Packaging (docs/packaging.md): the wheel pip builds from this tree,
installed into a virtual environment, finds its bundled plugins, ships
mxnet_acc.h and runs the demo; a third-party plugin package registers its
library through the acc_host.plugins entry-point group.

The wheel is built once per session with ``pip wheel --no-build-isolation``
from a copy of the tree (so no build/ or egg-info lands in the checkout),
reusing the plugins conftest already built. The virtual environment does
not see the system site-packages (what the base interpreter holds varies
from machine to machine): the wheel's dependencies (its Requires-Dist, and
theirs), and pip to install with, are copied into it from the distributions
installed in the environment running the tests, file by file as their
RECORD lists them, so nothing is downloaded. The wheels are then installed
with --no-deps --no-index, and every check first makes sure that acc_host is
imported from the environment, not from this checkout.

The example vendor package is the one docs/packaging.md shows: its
pyproject.toml, setup.py and module are read from the page.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

import build_plugins

DOC = ROOT / "docs" / "packaging.md"
HEADER = ROOT / "include" / "mxnet_acc.h"
TEST_PLUGINS = ROOT / "tests" / "plugins"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.M | re.S)
SUFFIX = build_plugins.SHARED_SUFFIX
BIN = "Scripts" if sys.platform == "win32" else "bin"

# Not copied for the build: what the wheel does not need, and what a build
# or a test run leaves in a checkout.
_COPY_SKIP_TOP = {".git", ".ci", "build", "dist", "tests", "benchmarks", "docs"}
_COPY_SKIP_ANYWHERE = ("__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis", ".venv*",
                       ".mxenv")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("wheel") is None
    and importlib.util.find_spec("setuptools.command.bdist_wheel") is None,
    reason="building a wheel without isolation needs setuptools>=70.1 or the wheel package "
           "(pip install -e '.[test]')")


# ---- helpers ------------------------------------------------------------------------------


def doc_block(language: str, first_line: str) -> str:
    """The one fenced block of docs/packaging.md in language starting with first_line."""
    blocks = [body for lang, body in FENCE.findall(DOC.read_text(encoding="utf-8"))
              if lang == language and body.startswith(first_line + "\n")]
    assert len(blocks) == 1, f"expected one ```{language} block starting with {first_line!r}"
    return blocks[0]


def clean_env() -> dict[str, str]:
    """This environment without what would make a child use this checkout's
    acc_host or change what discovery finds."""
    drop = {"PYTHONPATH", "PYTHONHOME", "MXNET_ACC_LIBRARIES", "MXNET_ACC_BUNDLED",
            "MXNET_ACC_ENTRY_POINTS", "MXNET_ACC_TRACE", "MXNET_ACC_CACHE_DIR"}
    return {key: value for key, value in os.environ.items() if key not in drop}


def run(command: Sequence[str | Path], cwd: Path, timeout: float = 300,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, (f"{' '.join(map(str, command))} exited "
                                      f"{done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def pip_wheel(source: Path, out: Path) -> Path:
    """Builds the wheel of the project at source into out; returns it."""
    run([sys.executable, "-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation",
         "--no-index", "-w", out], cwd=source)
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def wheel_tag(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/WHEEL"))
        text = archive.read(name).decode()
    return next(line.split(":", 1)[1].strip() for line in text.splitlines()
                if line.startswith("Tag:"))


def wheel_requires(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


def _ignore_for_copy(directory: str, names: list[str]) -> set[str]:
    skipped = {name for name in names
               if any(Path(name).match(pattern) for pattern in _COPY_SKIP_ANYWHERE)}
    if Path(directory) == ROOT:
        skipped |= _COPY_SKIP_TOP & set(names)
    return skipped


def _requirement(line: str) -> tuple[str, bool]:
    """(name, applies here) of a Requires-Dist line; an extra's never applies."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip carries its own copy
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    requirement = Requirement(line)
    marker = requirement.marker
    return requirement.name, marker is None or marker.evaluate({"extra": ""})


def dependency_closure(requires: Sequence[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions that satisfy requires (Requires-Dist
    lines), and their own requirements, in this environment."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = list(requires)
    while pending:
        name, applies = _requirement(pending.pop())
        key = re.sub(r"[-_.]+", "-", name).lower()
        if not applies or key in found:
            continue
        try:
            found[key] = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{name}, which the wheel needs, is not installed in the environment "
                        "running the tests (pip install -e '.[test]')")
        pending.extend(found[key].requires or [])
    return list(found.values())


def copy_distribution(dist: importlib.metadata.Distribution, site_packages: Path) -> None:
    """Installs an installed distribution into another environment's
    site-packages by copying the files its RECORD lists (not its scripts,
    which RECORD places outside site-packages)."""
    files: list[Any] | None = dist.files
    if files is None:  # no RECORD (a system package manager's): its top-level modules
        top = set((dist.read_text("top_level.txt") or "").split())
        base = Path(str(dist.locate_file("")))
        files = [path.name for path in base.iterdir() if path.name.split(".")[0] in top]
    for name in files:
        source = Path(str(dist.locate_file(name)))
        if Path(name).parts[:1] == ("..",) or not source.exists():
            continue
        target = site_packages / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)


class Venv:
    """A virtual environment without the system site-packages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = path / BIN / "python"

    def site_packages(self) -> Path:
        code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        return Path(self.python_code(code).stdout.strip())

    def install(self, wheel: Path) -> None:
        # --ignore-installed: whatever the environment holds, this wheel's files.
        run([self.python, "-m", "pip", "install", "--no-deps", "--no-index",
             "--ignore-installed", wheel], cwd=self.path)

    def acc_host(self, *args: str, cwd: Path | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([self.path / BIN / "acc-host", *args], cwd=cwd or self.path, check=check)

    def python_code(self, code: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([self.python, "-c", code], cwd=self.path, check=check)

    def contains(self, path: str | Path) -> bool:
        return Path(path).resolve().is_relative_to(self.path.resolve())


def list_records(venv: Venv) -> list[dict[str, Any]]:
    return json.loads(venv.acc_host("list", "--json").stdout)


# ---- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree, with the plugins conftest built (mtimes kept, so that
    build_plugins finds them up to date)."""
    copy = tmp_path_factory.mktemp("pkg") / "acc-host"
    shutil.copytree(ROOT, copy, ignore=_ignore_for_copy, symlinks=True)
    return copy


@pytest.fixture(scope="session")
def wheel(source_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pip_wheel(source_copy, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    env = Venv(tmp_path_factory.mktemp("venv") / "env")
    run([sys.executable, "-m", "venv", "--without-pip", env.path], cwd=env.path.parent)
    site_packages = env.site_packages()
    for dist in dependency_closure([*wheel_requires(wheel), "pip"]):
        copy_distribution(dist, site_packages)
    env.install(wheel)
    where = env.python_code("import acc_host; print(acc_host.__file__)").stdout.strip()
    assert env.contains(where), f"acc_host imported from {where}, not from the venv"
    return env


@pytest.fixture(scope="session")
def vendor_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The myacc-plugin package of docs/packaging.md, with a one-device,
    symbolic-only test plugin as its libmyacc library, built as a wheel."""
    project = tmp_path_factory.mktemp("vendor") / "myacc-plugin"
    package = project / "src" / "myacc_plugin"
    package.mkdir(parents=True)
    (project / "pyproject.toml").write_text(doc_block("toml", "# pyproject.toml of myacc-plugin"))
    (project / "setup.py").write_text(doc_block("python", "# setup.py of myacc-plugin"))
    module = doc_block("python", "# src/myacc_plugin/__init__.py")
    (package / "__init__.py").write_text(module)
    # A release build even when conftest builds sanitized plugins: the venv
    # has no sanitizer runtime preloaded.
    build_plugins.compile_library(
        [TEST_PLUGINS / "fake_acc.c"], package / build_plugins.library_name("myacc"),
        extra_flags=['-DFAKE_NAME="myacc"', "-DFAKE_NUM_ACC=1"])
    return pip_wheel(project, tmp_path_factory.mktemp("vendor_dist"))


@pytest.fixture(scope="session")
def with_vendor(venv: Venv, vendor_wheel: Path) -> Venv:
    venv.install(vendor_wheel)
    return venv


BROKEN_MODULE = '''\
from pathlib import Path


def raises():
    raise RuntimeError("vendor driver not installed")


def missing():
    return Path(__file__).resolve().parent / "libabsent.so"
'''

BROKEN_PYPROJECT = '''\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "broken-plugin"
version = "1.0.0"

[project.entry-points."acc_host.plugins"]
raises = "broken_plugin:raises"
missing = "broken_plugin:missing"
'''


@pytest.fixture(scope="session")
def with_broken(with_vendor: Venv, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """Also a package whose entry points fail: one raises, one names a
    file that does not exist."""
    project = tmp_path_factory.mktemp("broken") / "broken-plugin"
    (project / "src" / "broken_plugin").mkdir(parents=True)
    (project / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    (project / "src" / "broken_plugin" / "__init__.py").write_text(BROKEN_MODULE)
    with_vendor.install(pip_wheel(project, tmp_path_factory.mktemp("broken_dist")))
    return with_vendor


# ---- the acc-host wheel -------------------------------------------------------------------


def test_wheel_is_py3_none_for_this_platform_and_holds_plugins_and_header(wheel: Path) -> None:
    tag = wheel_tag(wheel)
    assert tag.startswith("py3-none-") and tag.endswith(platform.machine().lower()), tag
    assert wheel.name.endswith(f"-{tag}.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert archive.read("acc_host/_bundled/mxnet_acc.h") == HEADER.read_bytes()
    bundled = {name for name in names if name.startswith("acc_host/_bundled/")}
    sdk = {f"acc_host/_bundled/sdk/{path.name}"
           for path in (ROOT / "plugins" / "common").glob("*.[ch]")}
    assert bundled == {f"acc_host/_bundled/libcpu_ref{SUFFIX}",
                       f"acc_host/_bundled/libmlu_sim{SUFFIX}",
                       "acc_host/_bundled/mxnet_acc.h",
                       "acc_host/_bundled/mxnet_acc.cffi"} | sdk
    assert "acc_host/__init__.py" in names and "acc_host_pytest/__init__.py" in names
    assert not any(name.startswith(("tests/", "plugins/", "include/")) for name in names)


@pytest.mark.packaging
def test_sdist_carries_the_plugin_sources_and_no_built_library(source_copy: Path,
                                                               tmp_path: Path) -> None:
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.build_sdist(sys.argv[1]))")
    done = run([sys.executable, "-c", code, tmp_path], cwd=source_copy)
    sdist = tmp_path / done.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"build_plugins.py", "setup.py", "include/mxnet_acc.h", "plugins/common/json.c",
            "plugins/cpu_ref/kernels/fast/gemm.c", "plugins/mlu_sim/library.c"} <= names
    assert not [name for name in names if name.endswith((".so", ".dylib", ".stamp"))]


@pytest.mark.packaging
def test_installed_wheel_finds_its_bundled_plugins(venv: Venv) -> None:
    records = {record["name"]: record for record in list_records(venv) if record["loaded"]}
    for name in ("cpu_ref", "mlu"):
        assert records[name]["source"] == "bundled"
        assert venv.contains(records[name]["path"]), records[name]["path"]
    assert records["mlu"]["devices"] == 4
    assert records["cpu_ref"]["modes"] == ["imperative", "symbolic"]


@pytest.mark.packaging
def test_installed_wheel_ships_the_header(venv: Venv) -> None:
    code = ("from acc_host.abi import header; print(header.header_path()); "
            "print(header.FFI_SOURCE)")
    path, source = venv.python_code(code).stdout.split()
    header = Path(path)
    assert venv.contains(header) and header.read_bytes() == HEADER.read_bytes()
    assert source == "pre-parsed"  # the declarations the build wrote beside it


@pytest.mark.packaging
def test_demo_runs_from_the_installed_wheel(venv: Venv) -> None:
    # From the checkout, so that the demo also finds tests/models/ (the real model).
    done = venv.acc_host("demo", "--repeat", "1", cwd=ROOT)
    first = done.stdout.splitlines()[0]
    assert first.startswith("acc-host demo: loaded 'cpu_ref' from ")
    assert venv.contains(first.rsplit(" from ", 1)[1])
    assert "squeezenet1_1 (MXNet 1.9.1 checkpoint" in done.stdout
    assert "demo passed" in done.stdout and "MISMATCH" not in done.stdout


@pytest.mark.packaging
def test_partition_pictures_in_the_fresh_venv(venv: Venv, tmp_path: Path) -> None:
    """svg needs no Graphviz (the venv's PATH has no dot of its own, and the
    renderer calls none); png is drawn by acc-host's own rasteriser, as the
    venv lacks matplotlib."""
    model = str(ROOT / "tests" / "models" / "squeezenet_biased" / "model")
    args = ("partition", model, "--acc", "cpu_ref", "--shape", "2,3,64,64")
    svg = tmp_path / "partition.svg"
    venv.acc_host(*args, "--format", "svg", "--output", str(svg))
    assert svg.read_text().count('class="edge"') == 73
    assert venv.python_code("import importlib.util as u; "
                            "print(u.find_spec('matplotlib'))").stdout.strip() == "None"
    png = venv.acc_host(*args, "--format", "png", "--output", str(tmp_path / "x.png"),
                        check=False)
    assert png.returncode == 0, png.stderr
    assert (tmp_path / "x.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


# ---- a third-party plugin package ---------------------------------------------------------


@pytest.mark.packaging
def test_vendor_wheel_is_platform_specific(vendor_wheel: Path) -> None:
    from acc_host.plugins import sdk

    # py3-none-<platform>, as acc-host's own: any Python 3, not cp311-cp311
    assert wheel_tag(vendor_wheel) == sdk.wheel_tag() and not sdk.wheel_tag().endswith("-any")


@pytest.mark.packaging
def test_vendor_package_is_found_through_its_entry_point(with_vendor: Venv) -> None:
    records = {record["name"]: record for record in list_records(with_vendor)
               if record["loaded"]}
    myacc = records["myacc"]
    assert myacc["source"] == "entry point myacc-plugin:myacc"
    assert with_vendor.contains(myacc["path"]) and Path(myacc["path"]).parent.name == (
        "myacc_plugin")
    assert (myacc["devices"], myacc["modes"]) == (1, ["symbolic"])
    table = with_vendor.acc_host("list").stdout
    row = next(line for line in table.splitlines() if line.startswith("myacc "))
    assert row.split()[1:7] == ["1.2", "1", "symbolic", "entry", "point", "myacc-plugin:myacc"]
    done = with_vendor.python_code(
        "import acc_host as mx\n"
        "ctx = mx.myacc(0)\n"
        "print(ctx, mx.test_utils.list_acc(ctx), ctx.configure(speed='fast'))\n")
    assert done.stdout.strip().split(maxsplit=2) == ["myacc(0)", "[0]", "{'echo_speed': 'fast'}"]


@pytest.mark.packaging
def test_failing_entry_points_are_reported_and_import_still_works(with_broken: Venv) -> None:
    records = {record["source"]: record for record in list_records(with_broken)}
    raises = records["entry point broken-plugin:raises"]
    assert raises["loaded"] is False and raises["path"] is None
    assert raises["error"] == ("entry point broken-plugin:raises: broken_plugin:raises() raised "
                               "RuntimeError: vendor driver not installed")
    missing = records["entry point broken-plugin:missing"]
    assert missing["loaded"] is False and missing["path"].endswith("libabsent.so")
    assert "accelerator library not found" in missing["error"]
    assert records["entry point myacc-plugin:myacc"]["loaded"]

    table = with_broken.acc_host("list")
    assert table.returncode == 0
    # In entry-point name order, as docs/packaging.md shows them.
    failures = table.stdout.split("failed to load (2):\n", 1)[1].splitlines()
    assert failures[0].startswith(f"  {missing['path']} (entry point broken-plugin:missing): ")
    assert failures[1] == f"  {raises['error']}"

    done = with_broken.python_code("import acc_host as mx; print(mx.myacc(0))")
    assert done.stdout.strip() == "myacc(0)"
    assert "AccLibraryWarning: acc_host: skipped entry point broken-plugin:raises" in done.stderr
