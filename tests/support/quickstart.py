"""docs/quickstart.md's blocks and build command, for the tests that
compile its plugin (project/test_quickstart.py runs the page as written,
conformance/test_conformance.py puts the plugin through the kit)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import build_plugins

from .paths import ROOT

DOC = ROOT / "docs" / "quickstart.md"
INCLUDE = ROOT / "include"
COMMON = ROOT / "plugins" / "common"
COMMON_SOURCES = [COMMON / "json.c", COMMON / "decimal.c"]  # compiled in, as the page shows

C_FIRST_LINE = "/* myacc.c: the acc-host quickstart plugin */"
PYTHON_FIRST_LINE = "# quickstart usage"
# The flags of the page's build command, in its order.
BUILD_FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-pthread", "-fPIC", "-shared",
               "-fvisibility=hidden"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.M | re.S)


def page_blocks(language: str, first_line: str) -> list[str]:
    """The page's fenced blocks of language whose first line is first_line."""
    text = DOC.read_text(encoding="utf-8")
    return [body for lang, body in FENCE.findall(text)
            if lang == language and body.startswith(first_line + "\n")]


def build_command(source: Path, output: Path, extra: list[str]) -> list[str]:
    """The page's command: cc FLAGS -I<include> -I<common> myacc.c json.c decimal.c -o lib."""
    return [build_plugins.compiler(), *BUILD_FLAGS, *extra, f"-I{INCLUDE}", f"-I{COMMON}",
            str(source), *map(str, COMMON_SOURCES), "-o", str(output)]


def compile_or_fail(command: list[str], cwd: Path) -> None:
    """Runs the compiler command in cwd; a failure fails the test with its output."""
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout}{result.stderr}"
