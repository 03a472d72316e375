"""Builds the C plugins as part of every install (``pip install .`` and
``pip install -e .``); all metadata lives in pyproject.toml."""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

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


setup(cmdclass={"build_py": BuildPyWithPlugins}, distclass=BinaryDistribution)
