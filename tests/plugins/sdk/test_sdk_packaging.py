"""Packaging a vendor plugin with acc_host.plugins.sdk: the py3-none-<platform>
wheel tag and the setuptools classes that give it (a wheel of the template
plugin built with them), the functions a plugin exports, and the build line
``acc-host sdk`` suggests (-Werror, -Wl,-z,defs) compiling real plugins."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from support.quickstart import C_FIRST_LINE, page_blocks

import acc_host as mx
import build_plugins
from acc_host.cli import main
from acc_host.cli.sdk_cmd import build_example
from acc_host.plugins import sdk

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "plugins" / "template"


def test_wheel_tag_and_exports(capsys: pytest.CaptureFixture[str]) -> None:
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert sdk.wheel_platform() == platform
    assert sdk.wheel_tag() == f"py3-none-{platform}"
    symbolic, everything = sdk.abi_functions(imperative=False), sdk.abi_functions()
    additions = ("supportedOpsReasons", "retainsWeights", "supportsSparse")  # ABI 1.1, 1.2
    assert len(symbolic) == 11 + 3 and len(everything) == 17 + 3
    assert everything[:11] == symbolic[:11] and "accGetLastError" in symbolic
    assert symbolic[11:] == everything[17:] == additions
    assert set(everything) - set(symbolic) == {"mx_alloc", "mx_free", "mx_releaseAll",
                                               "copyToAcc", "copyFromAcc", "accGetExecutor"}
    assert main(["sdk", "--wheel-tag"]) == 0 and capsys.readouterr().out == sdk.wheel_tag() + "\n"
    assert main(["sdk", "--exports"]) == 0
    assert capsys.readouterr().out.split() == list(everything)


def test_the_suggested_build_line() -> None:
    assert "-Werror" in build_example("linux") and "-Wl,-z,defs" in build_example("linux")
    assert "-Werror" in build_example("darwin") and "-z" not in build_example("darwin")


def _exported(library: Path) -> set[str]:
    done = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                          text=True, check=True)
    return {line.split()[2] for line in done.stdout.splitlines()
            if len(line.split()) == 3 and line.split()[1] == "T"}


def _build(sources: list[Path], output: Path, *include: Path) -> None:
    """The build line acc-host sdk suggests, with these sources for myacc.c."""
    line = build_example(sys.platform).replace("\\\n", " ")
    line = line.replace("$(acc-host sdk --cflags)", " ".join(sdk.cflags()))
    line = line.replace("$(acc-host sdk --sources)", " ".join(map(str, sdk.sources())))
    words = shlex.split(line)
    words[0] = build_plugins.compiler()
    where = words.index("myacc.c")
    words[where:where + 1] = [*map(str, sources), *(f"-I{path}" for path in include)]
    words[words.index("-o") + 1] = str(output)
    done = subprocess.run(words, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("nm") is None,
                    reason="the export check reads the ELF dynamic symbols with nm (Linux)")
def test_plugins_built_with_it_export_exactly_the_abi(tmp_path: Path) -> None:
    template = tmp_path / "libtemplate.so"
    _build(sorted(TEMPLATE.glob("*.c")), template, TEMPLATE)
    optional = {"supportedOpsReasons", "retainsWeights", "supportsSparse"}  # 1.1, 1.2 additions
    assert _exported(template) - optional == set(sdk.abi_functions()) - optional  # 17
    assert _exported(template) <= set(sdk.abi_functions())
    (block,) = page_blocks("c", C_FIRST_LINE)
    (tmp_path / "myacc.c").write_text(block, encoding="utf-8")
    quickstart = tmp_path / "libmyacc.so"
    _build([tmp_path / "myacc.c"], quickstart)
    assert _exported(quickstart) == set(sdk.abi_functions(imperative=False)) - optional  # 11


SETUP = """\
from setuptools import setup

from acc_host.plugins.sdk import setup_options

setup(**setup_options())
"""

PYPROJECT = """\
[build-system]
requires = ["setuptools>=64", "wheel", "acc-host"]
build-backend = "setuptools.build_meta"

[project]
name = "template-plugin"
version = "0.1.0"
requires-python = ">=3.10"

[project.entry-points."acc_host.plugins"]
template = "template_plugin:library_path"

[tool.setuptools.package-data]
template_plugin = ["*.so", "*.dylib"]
"""

MODULE = """\
from pathlib import Path


def library_path() -> Path:
    return next(Path(__file__).resolve().parent.glob("libtemplate.*"))
"""


@pytest.mark.packaging
def test_a_template_plugin_wheel_is_py3_none_platform(tmp_path: Path) -> None:
    project = tmp_path / "template-plugin"
    package = project / "src" / "template_plugin"
    package.mkdir(parents=True)
    (project / "setup.py").write_text(SETUP)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text(MODULE)
    library = package / build_plugins.library_name("template")
    build_plugins.build_named(["template"], package, werror=True)
    assert library.is_file()
    out = tmp_path / "dist"
    # Without build isolation: this environment's setuptools, wheel and acc_host.
    env_path = str(Path(mx.__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(project), "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(out)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": env_path})
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("*.whl")
    assert wheel.name == f"template_plugin-0.1.0-{sdk.wheel_tag()}.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/WHEEL")))
    assert f"template_plugin/{library.name}" in names
    text = metadata.decode()
    assert "Root-Is-Purelib: false" in text
    assert re.search(rf"^Tag: {re.escape(sdk.wheel_tag())}$", text, re.MULTILINE)
