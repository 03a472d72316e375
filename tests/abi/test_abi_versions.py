"""Building against other ABI versions (issue 37, item 5): the 1.0 header is
kept as published and later minors only add to it; `acc-host sdk --abi 1.0`
and acc_host.plugins.sdk serve it; a plugin built against it loads in the
current host; refusals and the kit's version check say which side is newer."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import cffi
import numpy as np
import pytest

import acc_host as mx
from acc_host.abi import header, versions
from acc_host.abi.library import AccLibrary
from acc_host.conformance.checks_abi import check_version
from acc_host.conformance.report import CheckFailed
from acc_host.conformance.session import Session
from acc_host.plugins import registry, sdk

ROOT = Path(__file__).resolve().parents[2]
# The 1.0 header as published: it never changes (a change is a new version).
HEADER_1_0_SHA256 = "ad47de68a81bcf2ba378f3be1f1deb8f9c5143c889293e6efe9206737b541cba"


def _ffi(path: Path) -> cffi.FFI:
    ffi = cffi.FFI()
    ffi.cdef(header.cdef_source(path))
    return ffi


def test_the_1_0_header_is_kept_as_published() -> None:
    path = sdk.header("1.0")
    assert path.name == "mxnet_acc.h" and path.parent.name == "1.0"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == HEADER_1_0_SHA256
    text = path.read_text()
    assert "#define MX_ACC_API_VERSION 100" in text and "supportedOpsReasons" not in text


def test_later_minors_only_add_to_1_0() -> None:
    old, new = _ffi(sdk.header("1.0")), _ffi(sdk.header())
    old_decls = old._parser._declarations  # noqa: SLF001 - cffi has no public listing
    new_decls = new._parser._declarations  # noqa: SLF001
    assert set(old_decls) < set(new_decls)
    for key in old_decls:
        kind, name = key.split(" ", 1)
        if kind == "function":
            assert old_decls[key][0]._get_c_name() == new_decls[key][0]._get_c_name(), name
        elif kind in ("struct", "typedef") and not name.startswith("$"):
            assert old.sizeof(name) == new.sizeof(name), name
            if old.typeof(name).kind == "struct":
                assert [(f, old.offsetof(name, f)) for f, _ in old.typeof(name).fields] == \
                    [(f, new.offsetof(name, f)) for f, _ in new.typeof(name).fields], name
    old_lib, new_lib = old.dlopen(None), new.dlopen(None)
    constants = [key.split(" ", 1)[1] for key in old_decls if key.startswith("macro ")]
    assert "MX_ACC_ERR_INTERNAL" in constants
    assert dict(old.typeof("TensorDType").relements) == dict(new.typeof("TensorDType").relements)
    for name in constants:
        if name not in ("MX_ACC_API_VERSION", "MX_ACC_API_VERSION_MINOR"):
            assert getattr(old_lib, name) == getattr(new_lib, name), name
    assert (old_lib.MX_ACC_API_VERSION, new_lib.MX_ACC_API_VERSION) == (100, 102)
    added = {key for key in set(new_decls) - set(old_decls) if key.startswith("function ")}
    assert added == {"function supportedOpsReasons", "function retainsWeights",
                     "function supportsSparse"}
    assert new_lib.MX_ACC_REASON_MAX == 128 and not hasattr(old_lib, "MX_ACC_REASON_MAX")


def test_sdk_serves_each_published_version() -> None:
    assert sdk.abi_versions() == versions.published_versions() == [100, 101, 102]
    assert sdk.header() == header.header_path() == sdk.header("1.2") == sdk.header(102)
    assert sdk.header("1.1").parent.name == "1.1"
    assert sdk.cflags("1.0")[0] == f"-I{sdk.header('1.0').parent}"
    assert sdk.cflags("1.0")[1:] == sdk.cflags()[1:]
    assert sdk.abi_version("1.0") == 100 and sdk.abi_version() == 102
    for bad in ("0.9", "2.0", "1", "one", -1):
        with pytest.raises(versions.AbiVersionError):
            sdk.header(bad)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acc_host", "sdk", *args], capture_output=True,
                          text=True, timeout=120)


def test_acc_host_sdk_abi_option() -> None:
    assert _cli("--abi", "1.0", "--header").stdout.strip() == str(sdk.header("1.0"))
    assert _cli("--abi", "1.0", "--abi-version").stdout.strip() == "1.0"
    assert _cli("--list-abi").stdout.split() == ["1.0", "1.1", "1.2"]
    summary = _cli("--abi", "1.0").stdout
    assert "1.0 (MX_ACC_API_VERSION 100); an earlier version: this host is 1.2" in summary
    assert "$(acc-host sdk --abi 1.0 --cflags)" in summary
    refused = _cli("--abi", "0.9", "--header")
    assert refused.returncode == 2 and "it serves 1.0, 1.1, 1.2" in refused.stderr


def test_the_template_built_against_1_0_runs_in_the_current_host(tmp_path: Path) -> None:
    sources = [*sorted((ROOT / "plugins" / "template").glob("*.c")), *sdk.sources()]
    library_path = tmp_path / "libtemplate10.so"
    build = subprocess.run(["cc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
                            "-fPIC", "-shared", "-fvisibility=hidden", *sdk.cflags("1.0"),
                            *map(str, sources), "-o", str(library_path), "-lm"],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    library = AccLibrary(library_path, acc_name="template10")
    assert library.api_version == 100 and not library.gives_reasons
    assert not library.retains_weights
    ctx = mx.Context(registry.register(library_path, "template10").name, 0)
    data = mx.sym.Variable("data")
    out = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=3, name="fc"),
                            act_type="relu", name="relu")
    exe = out.simple_bind(ctx, data=(2, 4))
    assert len(exe.partition.subgraphs) == 1
    reference = out.simple_bind(mx.cpu(), data=(2, 4))
    for name, array in exe.arg_dict.items():
        value = np.random.default_rng(len(name)).standard_normal(array.shape).astype(np.float32)
        array[:] = value
        reference.arg_dict[name][:] = value
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), reference.forward()[0].asnumpy(),
                               rtol=1e-5, atol=1e-6)
    exe.close()


@pytest.mark.parametrize(("version", "words"), [
    (200, "the plugin is newer than this host (ABI 2.0 > 1.2): use an acc-host of ABI 2.x"),
    (9902, "the plugin is newer than this host (ABI 99.2 > 1.2)"),
    (0, "the plugin is older than this host (ABI 0.0 < 1.2): rebuild it")])
def test_the_kit_words_a_version_of_another_major(build_fake, version: int, words: str) -> None:
    session = Session(str(build_fake(f"v{version}", FAKE_API_VERSION=version)))
    with pytest.raises(CheckFailed) as failed:
        check_version(session)
    assert words in str(failed.value)


def test_the_kit_words_a_newer_minor(build_fake) -> None:
    session = Session(str(build_fake("v103", FAKE_API_VERSION=103)))
    assert check_version(session) == (
        "built for ABI 1.3 (103); the plugin is built for a newer minor version (ABI 1.3 > 1.2), "
        "which this host loads: it never calls what that minor added")
