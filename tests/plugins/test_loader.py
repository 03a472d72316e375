"""Loading accelerator libraries: contexts, discovery, and every load error.

The deliberately broken plugins are builds of tests/plugins/fake_acc.c.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import acc_host as mx
import build_plugins
from acc_host.abi.library import AccLibrary

BUNDLED = Path(mx.__file__).parent / "_bundled" / build_plugins.library_name("cpu_ref")


# ---- the bundled reference plugin and contexts ---------------------------------


def test_bundled_cpu_ref_is_discovered_at_import() -> None:
    library = mx.get_library("cpu_ref")
    assert Path(library.path) == BUNDLED.resolve()
    assert library.num_devices >= 1 and library.supports_imperative
    assert library.api_version == mx.API_VERSION
    assert mx.cpu_ref(0) == mx.Context("cpu_ref", 0)


def test_load_acc_returns_device_zero_and_sets_default() -> None:
    ctx = mx.load_acc(BUNDLED)
    assert ctx == mx.cpu_ref(0) == mx.acc() == mx.acc(0)
    assert (ctx.device_type, ctx.device_id) == ("cpu_ref", 0)
    assert mx.test_utils.list_acc(mx.acc()) == list(range(ctx.library.num_devices))


def test_contexts_compare_hash_and_print_like_mxnet() -> None:
    assert mx.cpu() == mx.cpu(0) == mx.Context("cpu") == mx.Context(mx.cpu())
    assert mx.cpu() != mx.cpu_ref(0)
    assert len({mx.cpu(), mx.cpu(0), mx.cpu_ref(0), mx.Context("cpu_ref", 0)}) == 2
    assert str(mx.cpu_ref(0)) == repr(mx.cpu_ref(0)) == "cpu_ref(0)"
    assert mx.cpu().device_typeid == 1 and mx.cpu_ref().device_typeid >= 64
    with mx.cpu_ref(0):
        assert mx.current_context() == mx.cpu_ref(0)
    assert mx.current_context() == mx.cpu()


def test_bad_contexts_are_clear_errors() -> None:
    with pytest.raises(mx.ContextError, match="device 99 does not exist"):
        mx.cpu_ref(99)
    with pytest.raises(mx.ContextError, match="no accelerator called 'nosuch'"):
        mx.Context("nosuch", 0)
    with pytest.raises(AttributeError):
        mx.nosuch  # noqa: B018
    with pytest.raises(mx.ContextError, match="not an accelerator"):
        mx.cpu().configure(a=1)
    with pytest.raises(mx.ContextError):
        mx.test_utils.list_acc(mx.cpu())


def test_cpu_ref_configure_round_trip() -> None:
    ctx = mx.cpu_ref(0)
    assert ctx.configure(num_threads=3) == {"num_threads": "3"}
    assert ctx.configure(num_threads=1, query="keys") == {
        "num_threads": "1", "keys": "num_threads,kernels,query,export_model,import_model,path"}
    ops = ctx.configure(query="ops")["ops"].split(",")
    assert {"Convolution:1", "FullyConnected:1", "Activation:1", "Pooling:1", "BatchNorm:1",
            "elemwise_add:1", "Flatten:1", "softmax:1"} <= set(ops)
    assert ctx.configure(query="version")["version"]
    assert ctx.configure() == {}


def test_cpu_ref_configure_errors_carry_the_plugin_message() -> None:
    with pytest.raises(mx.PluginError, match='unknown key "colour"') as error:
        mx.cpu_ref(0).configure(colour="blue")
    assert error.value.code_name == "MX_ACC_ERR_NOT_FOUND" and error.value.function == "configure"
    with pytest.raises(mx.PluginError, match="expected 1 to 256") as error:
        mx.cpu_ref(0).configure(num_threads=0)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"


# ---- load errors ---------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "libabsent.so"
    with pytest.raises(mx.LibraryNotFoundError, match="not found") as error:
        mx.load_acc(path)
    assert isinstance(error.value, FileNotFoundError) and error.value.path == str(path)


def test_a_directory_is_not_a_library(tmp_path: Path) -> None:
    with pytest.raises(mx.NotALibraryError, match="is not a file"):
        mx.load_acc(tmp_path)


def test_not_a_library_quotes_the_loader(tmp_path: Path) -> None:
    path = tmp_path / "libjunk.so"
    path.write_text("this is not an ELF file\n" * 10)
    with pytest.raises(mx.NotALibraryError, match="not a loadable library") as error:
        AccLibrary(path)
    assert "invalid ELF header" in str(error.value) or "too short" in str(error.value)


def test_missing_symbols_are_all_listed(build_fake) -> None:
    with pytest.raises(mx.MissingSymbolsError) as error:
        AccLibrary(build_fake("omits", FAKE_OMIT_SYMBOLS=True))
    assert error.value.missing == ["loadModel", "infer", "configure"]
    assert "loadModel, infer, configure" in str(error.value)


def test_imperative_plugin_must_export_the_imperative_set(build_fake) -> None:
    expected = "supportsImperative\\(\\) returned 1"
    with pytest.raises(mx.MissingSymbolsError, match=expected) as error:
        AccLibrary(build_fake("claims_imperative", FAKE_IMPERATIVE=True))
    assert error.value.missing == ["mx_alloc", "mx_free", "mx_releaseAll", "copyToAcc",
                                   "copyFromAcc", "accGetExecutor"]


def test_initialize_refusing_states_both_versions(build_fake) -> None:
    path = build_fake("refuses", FAKE_REFUSE_VERSION=True, FAKE_API_VERSION=203)
    with pytest.raises(mx.AccVersionError) as error:
        AccLibrary(path)
    message = str(error.value)
    assert "refused host ABI version 1.2 (102)" in message
    assert "built for ABI version 2.3 (203)" in message
    assert "fake refuses every host" in message  # the plugin's own words
    assert (error.value.host_version, error.value.plugin_version) == (102, 203)
    assert "the plugin is newer than this host (ABI 2.3 > 1.2)" in message


def test_host_refuses_a_plugin_of_another_major_version(build_fake) -> None:
    with pytest.raises(mx.AccVersionError, match=r"built for ABI version 2\.0 \(200\).*major.*"
                       r"the plugin is newer than this host"):
        AccLibrary(build_fake("future", FAKE_API_VERSION=200))


def test_initialize_failure_carries_code_and_message(build_fake) -> None:
    with pytest.raises(mx.PluginError, match="no fake hardware present") as error:
        AccLibrary(build_fake("no_hardware", FAKE_INIT_FAILS=True))
    assert error.value.code_name == "MX_ACC_ERR_DEVICE" and error.value.function == "initialize"


def test_no_device(build_fake) -> None:
    with pytest.raises(mx.NoDeviceError, match=r"getNumAcc\(\) returned 0"):
        AccLibrary(build_fake("deviceless", FAKE_NUM_ACC=0, FAKE_NAME='"deviceless"'))


@pytest.mark.parametrize("name", ["Bad", "9lives", "has-dash", "x" * 33])
def test_invalid_names(build_fake, name: str) -> None:
    label = "badname_" + str(abs(hash(name)))
    macro = json.dumps(name)
    if len(name) >= 32:  # does not fit the host's buffer: getAccName itself fails
        with pytest.raises(mx.PluginError, match="buffer too small"):
            AccLibrary(build_fake(label, FAKE_NAME=macro))
        return
    with pytest.raises(mx.InvalidAccNameError, match="is invalid"):
        AccLibrary(build_fake(label, FAKE_NAME=macro))


def test_invalid_override_name(build_fake) -> None:
    with pytest.raises(mx.InvalidAccNameError, match="'Upper'"):
        AccLibrary(build_fake("plain"), acc_name="Upper")


@pytest.mark.parametrize("name", ["cpu", "acc", "load_acc", "errors", "demo", "nd", "sym", "ops"])
def test_reserved_names(build_fake, name: str) -> None:
    with pytest.raises(mx.InvalidAccNameError, match="reserved"):
        mx.load_acc(build_fake(f"reserved_{name}", FAKE_NAME=f'"{name}"'))


def test_failure_code_with_and_without_a_message(build_fake) -> None:
    ctx = mx.load_acc(build_fake("talker", FAKE_NAME='"talker"'))
    with pytest.raises(mx.PluginError) as error:
        ctx.configure(fail="now")
    assert error.value.plugin_message == 'fail requested with "now" on device 0'
    assert "MX_ACC_ERR_INVALID_ARG" in str(error.value)
    silent = mx.load_acc(build_fake("silent", FAKE_NAME='"silent"', FAKE_NO_LAST_ERROR=True))
    with pytest.raises(mx.PluginError) as error:
        silent.configure(fail="now")
    assert error.value.plugin_message == ""
    assert str(error.value) == "silent: configure (fail) failed with MX_ACC_ERR_INVALID_ARG"


def test_two_libraries_claiming_one_name(build_fake) -> None:
    first = mx.load_acc(build_fake("twin_a", FAKE_NAME='"twin"'))
    with pytest.raises(mx.AccNameConflictError, match="already used by") as error:
        mx.load_acc(build_fake("twin_b", FAKE_NAME='"twin"'))
    assert str(first.library.path) in str(error.value)
    renamed = mx.load_acc(build_fake("twin_b"), acc_name="twin_b")
    assert renamed.library is not first.library and mx.twin_b(0) == renamed


# ---- several libraries -----------------------------------------------------------------


def test_loading_the_same_library_twice(build_fake, tmp_path: Path) -> None:
    path = build_fake("again", FAKE_NAME='"again"')
    first = mx.load_acc(path)
    link = tmp_path / "libagain_link.so"
    link.symlink_to(path)
    assert mx.load_acc(path) == first and mx.load_acc(link) == first
    assert mx.load_acc(path).library is first.library
    with pytest.raises(mx.AccNameConflictError, match="already loaded as 'again'"):
        mx.load_acc(path, acc_name="other_name")


def test_two_different_libraries_at_once(build_fake) -> None:
    alpha = mx.load_acc(build_fake("alpha", FAKE_NAME='"alpha"', FAKE_NUM_ACC=3))
    cpu_ref = mx.load_acc(BUNDLED)
    assert mx.acc() == cpu_ref  # the most recent load_acc is the default
    assert mx.test_utils.list_acc(alpha) == [0, 1, 2]
    assert mx.alpha(2).device_id == 2 and mx.alpha(2).library is alpha.library
    assert alpha.configure(speed="fast") == {"echo_speed": "fast"}
    assert mx.cpu_ref(0).configure(num_threads=1) == {"num_threads": "1"}
    mx.load_acc(alpha.library.path)
    assert mx.acc(1) == mx.alpha(1)
    assert {"alpha", "cpu_ref"} <= set(dir(mx))


# ---- discovery at import -----------------------------------------------------------------


def _import_in_child(env_dir: Path | None, code: str,
                     bundled: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("MXNET_ACC_LIBRARIES", None)
    env["MXNET_ACC_BUNDLED"] = "1" if bundled else "0"
    env["MXNET_ACC_ENTRY_POINTS"] = "0"  # whatever packages are installed here
    if env_dir is not None:
        env["MXNET_ACC_LIBRARIES"] = str(env_dir)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)


def test_env_directory_discovery_survives_broken_libraries(build_fake, tmp_path: Path) -> None:
    directory = tmp_path / "accs"
    directory.mkdir()
    (directory / "libgood.so").write_bytes(
        build_fake("envgood", FAKE_NAME='"envgood"').read_bytes())
    (directory / "libomits.so").write_bytes(
        build_fake("omits", FAKE_OMIT_SYMBOLS=True).read_bytes())
    (directory / "libjunk.so").write_text("junk")
    (directory / "notes.txt").write_text("not a library, not looked at")
    result = _import_in_child(directory, (
        "import acc_host as mx\n"
        "print(sorted(lib.name for lib in mx.libraries()))\n"
        "print(mx.test_utils.list_acc(mx.envgood()))\n"
        "try:\n    mx.acc()\nexcept mx.ContextError as e:\n    print('ambiguous:', e)\n"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert {"cpu_ref", "envgood"} <= set(eval(lines[0]))  # noqa: S307 (our own output)
    assert lines[1] == "[0, 1]"
    assert lines[2].startswith("ambiguous: mx.acc() needs a default accelerator")
    assert "libjunk.so" in result.stderr and "not a loadable library" in result.stderr
    assert "libomits.so" in result.stderr and "loadModel, infer, configure" in result.stderr
    assert "notes.txt" not in result.stderr


def test_env_directory_that_does_not_exist(tmp_path: Path) -> None:
    code = "import acc_host as mx; print(len(mx.libraries()))"
    result = _import_in_child(tmp_path / "missing", code, bundled=False)
    assert result.returncode == 0 and result.stdout.strip() == "0"
    assert "is not a directory" in result.stderr


def test_only_one_library_makes_acc_unambiguous(build_fake, tmp_path: Path) -> None:
    (tmp_path / "libonly.so").write_bytes(
        build_fake("only", FAKE_NAME='"only"').read_bytes())
    result = _import_in_child(tmp_path, "import acc_host as mx; print(mx.acc(), mx.acc(1))",
                              bundled=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["only(0)", "only(1)"]


def test_bundled_plugins_can_be_left_out() -> None:
    code = "import acc_host as mx; print(sorted(lib.name for lib in mx.libraries()))"
    assert "cpu_ref" in _import_in_child(None, code).stdout
    assert _import_in_child(None, code, bundled=False).stdout.strip() == "[]"
