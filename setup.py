"""Builds the C plugins as part of every install (``pip install .`` and
``pip install -e .``); all metadata lives in pyproject.toml."""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:  # setuptools >= 70.1 has the command; older ones take it from the wheel package
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_plugins  # noqa: E402


class BuildPyWithPlugins(build_py):
    """Compiles plugins/*/ into src/acc_host/_bundled/ before the package
    files are collected, so the libraries ship as package data."""

    def run(self) -> None:
        build_plugins.build_all()
        super().run()


class BinaryDistribution(Distribution):
    """The wheel holds native libraries, so it is platform-specific."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """Tags the wheel ``py3-none-<platform>``: the plugins are loaded with
    cffi's dlopen and never link against Python, so one wheel serves every
    Python 3 of a platform; only the platform part of the tag matters."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(cmdclass={"build_py": BuildPyWithPlugins, "bdist_wheel": PlatformWheel},
      distclass=BinaryDistribution)
