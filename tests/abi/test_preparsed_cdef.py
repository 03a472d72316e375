"""The pre-parsed cffi declarations (_bundled/mxnet_acc.cffi) are the
header's: the file is what the header's declarations give now, the FFI the
host builds from it equals the one cffi parses from the header, and a file
made from other declarations is never used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import cffi
import pytest
from support.paths import ROOT

from acc_host.abi import header

HEADER = ROOT / "include" / "mxnet_acc.h"


def _cname(ctype: Any) -> str:
    """A C type's name; a pre-parsed FFI names a typedef'd struct "struct
    NAME" where the parsed one says "NAME" (the same type)."""
    return ctype.cname.replace("struct ", "")


def _parsed() -> Any:
    built = cffi.FFI()
    built.cdef(header.cdef_source(HEADER))
    return built


def test_the_bundled_file_is_the_headers_declarations_now() -> None:
    shipped = header.header_path().parent / header.PREPARSED_NAME
    assert shipped.read_text(encoding="utf-8") == header.preparsed_text(
        header.cdef_source(HEADER))


def test_the_host_uses_the_pre_parsed_declarations() -> None:
    assert header.FFI_SOURCE == "pre-parsed"


def test_types_match_the_parsed_header() -> None:
    parsed = _parsed()
    assert header.ffi.list_types() == parsed.list_types()
    for name in parsed.list_types()[1]:  # the structs: layout and every field
        assert header.ffi.sizeof(name) == parsed.sizeof(name), name
        assert header.ffi.alignof(name) == parsed.alignof(name), name
        fields = parsed.typeof(name).fields
        assert [field for field, _ in header.ffi.typeof(name).fields] == \
            [field for field, _ in fields], name
        for field, info in fields:
            assert header.ffi.offsetof(name, field) == parsed.offsetof(name, field)
            mine = dict(header.ffi.typeof(name).fields)[field]
            assert _cname(mine.type) == _cname(info.type), (name, field)
    assert header.ffi.typeof("TensorDType").relements == parsed.typeof("TensorDType").relements


def test_functions_and_constants_match_the_parsed_header() -> None:
    parsed = _parsed()
    plugin = str(header.header_path().parent / "libcpu_ref.so")
    reference, library = parsed.dlopen(plugin), header.dlopen(plugin)
    names = dir(reference)
    assert sorted(dir(library)) == sorted(names)
    constants = [name for name in names if isinstance(getattr(reference, name), int)]
    functions = sorted(set(names) - set(constants))
    assert "loadModel" in functions and "MX_ACC_OK" in constants
    for name in constants:
        assert getattr(library, name) == getattr(reference, name), name
    for name in functions:
        assert _cname(header.ffi.typeof(getattr(library, name))) == \
            _cname(parsed.typeof(getattr(reference, name))), name


def test_a_symbol_the_library_lacks_is_an_attribute_error() -> None:
    lib = header.dlopen(None)  # the interpreter exports no ABI function
    with pytest.raises(AttributeError, match="loadModel"):
        lib.loadModel  # noqa: B018


def _ffi_source_with(folder: Path) -> str:
    """FFI_SOURCE of acc_host.abi.header loaded by path from a copy whose
    header (and pre-parsed file) lie in folder/_bundled."""
    package = folder / "acc_host"
    (package / "abi").mkdir(parents=True, exist_ok=True)
    (package / "abi" / "header.py").write_text(
        (ROOT / "src" / "acc_host" / "abi" / "header.py").read_text(encoding="utf-8"))
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location(\n"
            f"    'h', {str(package / 'abi' / 'header.py')!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(m.FFI_SOURCE, m.API_VERSION, 'pycparser' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_stale_or_damaged_file_is_not_used(tmp_path: Path) -> None:
    bundled = tmp_path / "acc_host" / "_bundled"
    bundled.mkdir(parents=True)
    text = HEADER.read_text(encoding="utf-8")
    (bundled / "mxnet_acc.h").write_text(text, encoding="utf-8")
    header.write_preparsed(bundled, HEADER)
    assert _ffi_source_with(tmp_path) == "pre-parsed 102 False"

    # The header changes (a new declaration): the old file is not used.
    changed = text.replace("/* ACC_CDEF_END */", "int addedLater(void);\n/* ACC_CDEF_END */")
    assert changed != text
    (bundled / "mxnet_acc.h").write_text(changed, encoding="utf-8")
    assert _ffi_source_with(tmp_path).startswith("parsed 102")

    (bundled / "mxnet_acc.h").write_text(text, encoding="utf-8")
    (bundled / header.PREPARSED_NAME).write_text("{'format': 1, 'cdef_sha256': [}")
    assert _ffi_source_with(tmp_path).startswith("parsed 102")
