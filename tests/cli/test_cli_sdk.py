"""``acc-host sdk``, run as a subprocess: the header and SDK paths of a
checkout and of an installed package's layout, the flags a plugin builds
with, and the failures (two options at once, SDK sources not installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import acc_host as mx
import build_plugins
from acc_host.abi import header as abi_header
from acc_host.plugins import sdk

SRC = Path(mx.__file__).resolve().parent.parent
OPTIONS = ("--cflags", "--include-dir", "--header", "--source-dir", "--sources",
           "--abi-version")


def cli(*args: str, pythonpath: Path = SRC) -> subprocess.CompletedProcess[str]:
    """acc-host args with the acc_host found under pythonpath."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MXNET_ACC_")}
    env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-m", "acc_host", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def value(*args: str, pythonpath: Path = SRC) -> str:
    """The output of acc-host sdk args: one line for an option."""
    done = cli("sdk", *args, pythonpath=pythonpath)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert not args or len(done.stdout.splitlines()) == 1
    return done.stdout.strip()


def test_paths_are_the_ones_the_host_reads() -> None:
    header = Path(value("--header"))
    assert header == abi_header.header_path() and header.name == "mxnet_acc.h"
    assert Path(value("--include-dir")) == header.parent
    source_dir = Path(value("--source-dir"))
    assert source_dir == sdk.source_dir()
    assert {"json.h", "json.c", "decimal.c", "graph.h"} <= {p.name for p in source_dir.iterdir()}
    assert value("--cflags").split() == [f"-I{header.parent}", f"-I{source_dir}"]
    sources = [Path(path) for path in value("--sources").split()]
    assert sources == sorted(source_dir.glob("*.c")) and source_dir / "json.c" in sources
    assert value("--abi-version") == abi_header.version_text(abi_header.API_VERSION) == "1.2"


def test_the_built_checkout_serves_the_copies_beside_the_bundled_libraries() -> None:
    # conftest ran build_plugins.build_all(), which copies plugins/common.
    bundled = SRC / "acc_host" / "_bundled"
    assert Path(value("--source-dir")) == bundled / "sdk"
    common = build_plugins.COMMON_DIR
    for path in [*common.glob("*.c"), *common.glob("*.h")]:
        assert (bundled / "sdk" / path.name).read_bytes() == path.read_bytes()


def test_summary_and_help() -> None:
    summary = value()
    for fragment in ("ABI version  1.2 (MX_ACC_API_VERSION 102)", "mxnet_acc.h", "json.c",
                     "$(acc-host sdk --cflags)", "$(acc-host sdk --sources)"):
        assert fragment in summary
    done = cli("sdk", "--help")
    assert done.returncode == 0
    for option in OPTIONS:
        assert option in done.stdout
    assert "sdk" in cli("--help").stdout


def test_a_plugin_compiles_against_the_flags(tmp_path: Path) -> None:
    source = tmp_path / "probe.c"
    source.write_text('#include "mxnet_acc.h"\n#include "json.h"\n#include "graph.h"\n'
                      "MX_ACC_EXPORT int getAccApiVersion(void) { return MX_ACC_API_VERSION; }\n")
    command = [build_plugins.compiler(), "-std=c11", "-Wall", "-Wextra", "-Werror",
               "-fsyntax-only", *value("--cflags").split(), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_two_options_at_once_are_a_usage_error() -> None:
    done = cli("sdk", "--cflags", "--sources")
    assert done.returncode == 2
    assert "not allowed with" in done.stderr and "Traceback" not in done.stderr


# ---- an installed package's layout ---------------------------------------------------------


def _installed(site: Path, with_sdk: bool) -> Path:
    """A copy of the acc_host package under site, laid out as pip installs
    it (no checkout around it, no plugins): _bundled/ holds the header and,
    with_sdk, the SDK sources."""
    package = site / "acc_host"
    shutil.copytree(SRC / "acc_host", package,
                    ignore=shutil.ignore_patterns("_bundled", "__pycache__"))
    bundled = package / "_bundled"
    build_plugins.copy_sdk(bundled)
    if not with_sdk:
        shutil.rmtree(bundled / "sdk")
    return bundled


def test_installed_layout(tmp_path: Path) -> None:
    site = tmp_path / "site"
    bundled = _installed(site, with_sdk=True)
    assert value("--cflags", pythonpath=site).split() == [f"-I{bundled}", f"-I{bundled / 'sdk'}"]
    assert Path(value("--header", pythonpath=site)) == bundled / "mxnet_acc.h"
    assert value("--sources", pythonpath=site).split()[0] == str(bundled / "sdk" / "attrs.c")


def test_installed_without_the_sdk_sources_exits_3(tmp_path: Path) -> None:
    site = tmp_path / "site"
    bundled = _installed(site, with_sdk=False)
    assert Path(value("--header", pythonpath=site)) == bundled / "mxnet_acc.h"
    for option in ("--sources", "--cflags", "--source-dir", ""):
        done = cli("sdk", *filter(None, [option]), pythonpath=site)
        assert done.returncode == 3, (option, done.stdout, done.stderr)
        assert done.stderr.startswith("acc-host: error: the SDK sources")
        assert "reinstall acc-host" in done.stderr and "Traceback" not in done.stderr
