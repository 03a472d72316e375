"""The acc_host.plugins entry-point group (acc_host.plugins.entry_points and its use
by discovery at import).

The distributions are real ones as far as importlib.metadata is concerned:
a ``*.dist-info`` directory with METADATA and entry_points.txt beside the
vendor module, in a directory put on the path. The contract is checked in
this process (no library is loaded); discovery at import runs in a child
process, so that this process' registry stays as it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

import acc_host as mx
from acc_host.errors import EntryPointError, LibraryError
from acc_host.plugins import entry_points

SRC = Path(mx.__file__).resolve().parent.parent

CONTRACT_MODULE = '''
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBRARY = str(HERE / "libconst.so")


def one():
    return HERE / "libone.so"


def several():
    return [HERE / "liba.so", str(HERE / "libb.so")]


def generated():
    yield HERE / "libgen.so"


def nothing():
    return ()


def relative():
    return "libvendor.so"


def raises():
    raise RuntimeError("no driver for the card")


def number():
    return 42


def mixed():
    return [HERE / "liba.so", 7]


def raw():
    return b"/opt/vendor/libraw.so"


def breaks_half_way():
    yield HERE / "liba.so"
    raise OSError("bus error")
'''


def make_distribution(site: Path, name: str, module: str, source: str,
                      points: Mapping[str, str]) -> None:
    """An installed distribution called name: module.py with source, and
    points (entry-point name -> object reference) in the acc_host.plugins group."""
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                                   encoding="utf-8")
    lines = "".join(f"{point} = {target}\n" for point, target in points.items())
    (info / "entry_points.txt").write_text(f"[{entry_points.GROUP}]\n{lines}", encoding="utf-8")


# ---- the contract -----------------------------------------------------------------------

CASES = {"const": "LIBRARY", "one": "one", "several": "several", "generated": "generated",
         "nothing": "nothing", "relative": "relative", "raises": "raises", "number": "number",
         "mixed": "mixed", "raw": "raw", "half": "breaks_half_way",
         "noattr": "no_such_function"}


@pytest.fixture(scope="module")
def contract_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("contract_site")
    points = {name: f"acc_contract_vendor:{target}" for name, target in CASES.items()}
    make_distribution(site, "contract-vendor", "acc_contract_vendor", CONTRACT_MODULE, points)
    make_distribution(site, "absent-vendor", "acc_absent_vendor_stub", "", {
        "gone": "acc_no_such_vendor_module:library_path"})
    return site


@pytest.fixture
def points(contract_site: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    monkeypatch.syspath_prepend(str(contract_site))
    monkeypatch.delitem(sys.modules, "acc_contract_vendor", raising=False)
    return {point.name: point for point in entry_points.plugin_entry_points()
            if _dist(point) in ("contract-vendor", "absent-vendor")}


def _dist(point: object) -> str:
    dist = getattr(point, "dist", None)
    return "" if dist is None else dist.name


def test_entry_points_are_read_in_distribution_then_name_order(points) -> None:
    names = list(points)
    assert names[0] == "gone"  # absent-vendor sorts before contract-vendor
    assert names[1:] == sorted(CASES)
    assert entry_points.label(points["one"]) == "entry point contract-vendor:one"


@pytest.mark.parametrize(("name", "expected"), [
    ("const", ["libconst.so"]),
    ("one", ["libone.so"]),
    ("several", ["liba.so", "libb.so"]),
    ("generated", ["libgen.so"]),
    ("nothing", []),
])
def test_a_path_or_a_callable_giving_paths(points, contract_site: Path, name: str,
                                           expected: list[str]) -> None:
    paths = entry_points.library_paths(points[name])
    assert paths == [contract_site / file for file in expected]
    assert all(isinstance(path, Path) and path.is_absolute() for path in paths)


@pytest.mark.parametrize(("name", "reason"), [
    ("relative", "returned the relative path 'libvendor.so'; library paths must be absolute"),
    ("raises", "acc_contract_vendor:raises() raised RuntimeError: no driver for the card"),
    ("number", "returned int 42; expected a path or an iterable of paths"),
    ("mixed", "returned an iterable holding int 7; expected paths"),
    ("raw", "returned bytes b'/opt/vendor/libraw.so'; expected a path"),
    ("half", "iteration raised OSError: bus error"),
    ("noattr", "loading acc_contract_vendor:no_such_function failed: AttributeError"),
    ("gone", "loading acc_no_such_vendor_module:library_path failed: ModuleNotFoundError"),
])
def test_every_failure_is_an_entry_point_error_naming_it(points, name: str, reason: str) -> None:
    with pytest.raises(EntryPointError) as error:
        entry_points.library_paths(points[name])
    dist = "absent-vendor" if name == "gone" else "contract-vendor"
    assert str(error.value).startswith(f"entry point {dist}:{name}: ")
    assert reason in str(error.value)
    assert error.value.entry_point == f"entry point {dist}:{name}"
    assert isinstance(error.value, LibraryError)


def test_switched_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(entry_points.ENV_VAR, "0")
    assert not entry_points.enabled()
    monkeypatch.setenv(entry_points.ENV_VAR, "1")
    assert entry_points.enabled()


# ---- discovery at import ------------------------------------------------------------------


def _child(site: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("MXNET_ACC_LIBRARIES", entry_points.ENV_VAR)}
    environment.update({"MXNET_ACC_BUNDLED": "0", **env,
                        "PYTHONPATH": os.pathsep.join([str(site), str(SRC)])})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, timeout=120, check=False)


@pytest.fixture(scope="module")
def vendor_site(tmp_path_factory: pytest.TempPathFactory, build_fake) -> Path:
    site = tmp_path_factory.mktemp("vendor_site")
    package_lib = site / "libepgood.so"
    package_lib.write_bytes(build_fake("epgood", FAKE_NAME='"epgood"').read_bytes())
    (site / "libepjunk.so").write_text("not a library")
    make_distribution(site, "ep-vendor", "acc_ep_vendor", '''
        from pathlib import Path

        HERE = Path(__file__).resolve().parent


        def library():
            return HERE / "libepgood.so"


        def junk():
            return [HERE / "libepjunk.so", HERE / "libmissing.so"]


        def broken():
            raise RuntimeError("vendor driver not installed")
        ''', {"good": "acc_ep_vendor:library", "junk": "acc_ep_vendor:junk",
              "broken": "acc_ep_vendor:broken"})
    return site


REPORT = (
    "import json, acc_host as mx\n"
    "from acc_host.cli.list_cmd import records\n"
    "print(json.dumps({'records': records(), 'ctx': str(mx.epgood(1)),\n"
    "                  'names': sorted(lib.name for lib in mx.libraries())}))\n")


def test_discovery_loads_entry_points_and_reports_what_failed(vendor_site: Path) -> None:
    done = _child(vendor_site, REPORT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["names"] == ["epgood"] and result["ctx"] == "epgood(1)"
    by_source = {}
    for record in result["records"]:
        by_source.setdefault(record["source"], []).append(record)
    assert list(by_source) == ["entry point ep-vendor:broken", "entry point ep-vendor:good",
                               "entry point ep-vendor:junk"]
    broken, = by_source["entry point ep-vendor:broken"]
    assert broken["path"] is None and broken["loaded"] is False
    assert "acc_ep_vendor:broken() raised RuntimeError: vendor driver not installed" in (
        broken["error"])
    good, = by_source["entry point ep-vendor:good"]
    assert good["loaded"] and good["name"] == "epgood" and good["devices"] == 2
    assert Path(good["path"]) == (vendor_site / "libepgood.so").resolve()
    junk, missing = by_source["entry point ep-vendor:junk"]
    assert Path(junk["path"]).name == "libepjunk.so" and "not a loadable library" in junk["error"]
    assert Path(missing["path"]).name == "libmissing.so" and "not found" in missing["error"]
    # Each failure is an AccLibraryWarning naming the entry point.
    assert "AccLibraryWarning: acc_host: skipped entry point ep-vendor:broken: " in done.stderr
    assert "libepjunk.so (from entry point ep-vendor:junk)" in done.stderr
    assert "libmissing.so (from entry point ep-vendor:junk)" in done.stderr


def test_list_table_shows_the_entry_point_sources(vendor_site: Path) -> None:
    done = _child(vendor_site, "import sys, acc_host.cli as cli; sys.exit(cli.main(['list']))")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "entry point ep-vendor:good" in next(line for line in lines if line.startswith("epgood"))
    assert "failed to load (3):" in lines
    assert ("  entry point ep-vendor:broken: acc_ep_vendor:broken() raised RuntimeError: vendor "
            "driver not installed") in lines


def test_entry_points_can_be_switched_off(vendor_site: Path) -> None:
    code = "import acc_host as mx; print(len(mx.libraries()), len(mx.plugins.discovery.report()))"
    done = _child(vendor_site, code, MXNET_ACC_ENTRY_POINTS="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0"] and "AccLibraryWarning" not in done.stderr
