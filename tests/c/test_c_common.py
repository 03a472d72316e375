"""Builds and runs tests/c/test_common.c against plugins/common/*.c.

The C test program is compiled with AddressSanitizer, UndefinedBehaviorSanitizer
and leak detection. Its allocations are wrapped with the linker's --wrap so
that it can make each allocation of the code under test fail in turn.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.paths import ROOT

COMMON = ROOT / "plugins" / "common"
SOURCES = [COMMON / "json.c", COMMON / "attrs.c", COMMON / "graph.c", COMMON / "decimal.c"]
TEST_SOURCE = ROOT / "tests" / "c" / "test_common.c"
INCLUDES = ["-I" + str(ROOT / "include"), "-I" + str(COMMON)]

TEST_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"]
SANITIZERS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
              "-fno-sanitize-recover=undefined"]
WRAP_MALLOC = ["-DACC_TEST_WRAP_MALLOC",
               "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc"]
# The flags plugins are built with: the modules must compile clean under them.
PLUGIN_FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                "-fPIC"]

GCC = shutil.which("gcc")
pytestmark = pytest.mark.skipif(GCC is None, reason="gcc is not installed")


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=600,
                          **kwargs)


def _build(output, extra_flags):
    args = [GCC, *TEST_FLAGS, *extra_flags, *INCLUDES, str(TEST_SOURCE),
            *map(str, SOURCES), "-o", str(output)]
    return _run(args)


def _sanitizers_work(tmp_path):
    """True if an ASan/UBSan binary can be built and run here (it cannot,
    e.g., without the sanitizer runtimes or under some ptrace sandboxes)."""
    probe = tmp_path / "probe.c"
    probe.write_text("#include <stdlib.h>\n"
                     "int main(void) { free(malloc(1)); return 0; }\n")
    binary = tmp_path / "probe"
    built = _run([GCC, *SANITIZERS, str(probe), "-o", str(binary)])
    if built.returncode != 0:
        return False
    return _run([str(binary)], env=_sanitizer_env()).returncode == 0


def _sanitizer_env():
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "detect_leaks=1"
    env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    return env


def _decimal_comma_locale(tmp_path):
    """Compiles de_DE.UTF-8 into tmp_path when the system lacks it, so that
    the locale-independence checks run; returns the LOCPATH or None."""
    localedef = shutil.which("localedef")
    if localedef is None or not Path("/usr/share/i18n/locales/de_DE").exists():
        return None
    locales = tmp_path / "locales"
    locales.mkdir()
    _run([localedef, "-i", "de_DE", "-f", "UTF-8", str(locales / "de_DE.UTF-8")])
    return str(locales) if (locales / "de_DE.UTF-8").exists() else None


def test_common_modules_under_sanitizers(tmp_path):
    binary = tmp_path / "test_common"
    if _sanitizers_work(tmp_path):
        flags, env = SANITIZERS + WRAP_MALLOC, _sanitizer_env()
        fallback = None
    else:
        flags, env = WRAP_MALLOC, dict(os.environ)
        fallback = ("AddressSanitizer/UBSan binaries cannot run in this "
                    "environment; ran test_common without sanitizers")
    locpath = _decimal_comma_locale(tmp_path)
    if locpath is not None:
        env["LOCPATH"] = locpath
    built = _build(binary, flags)
    assert built.returncode == 0, built.stdout + built.stderr
    result = _run([str(binary)], env=env)
    output = result.stdout + result.stderr
    print(output)
    assert result.returncode == 0, output
    assert " 0 failed" in result.stdout, output
    if fallback is not None:
        pytest.xfail(fallback)


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_module_compiles_with_plugin_flags(tmp_path, source):
    obj = tmp_path / (source.stem + ".o")
    result = _run([GCC, *PLUGIN_FLAGS, *INCLUDES, "-c", str(source), "-o",
                   str(obj)])
    assert result.returncode == 0, result.stdout + result.stderr


def _is_writable_data(section):
    if section.startswith(".data.rel.ro"):
        return False  # relocated once at load time, read-only afterwards
    return section.startswith((".data", ".bss", ".tdata", ".tbss", "COMMON"))


@pytest.mark.skipif(shutil.which("size") is None, reason="binutils size is not installed")
@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_module_has_no_mutable_globals(tmp_path, source):
    """Thread safety by construction: no writable static or global data."""
    obj = tmp_path / (source.stem + ".o")
    built = _run([GCC, *PLUGIN_FLAGS, *INCLUDES, "-c", str(source), "-o",
                  str(obj)])
    assert built.returncode == 0, built.stdout + built.stderr
    sections = _run(["size", "-A", str(obj)]).stdout.splitlines()
    writable = [line for line in sections
                if len(line.split()) == 3 and _is_writable_data(line.split()[0])
                and line.split()[1] != "0"]
    assert writable == []
