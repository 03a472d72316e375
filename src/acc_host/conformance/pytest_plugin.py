"""The conformance kit as a pytest plugin: ``pytest --acc-lib=path/libx.so``.

The ``pytest11`` entry point ``acc_host_conformance`` is the light module
:mod:`acc_host_pytest` (or ``-p acc_host_pytest``): it declares the options
and registers this module only when ``--acc-lib`` is given, so that an
installed acc-host never imports acc_host (and loads plugins) into an
unrelated pytest run. With it, the kit runs once per library at collection time and every check
becomes one test item, ``<library>::check[<check id>]``, that passes, fails
with the check's detail, or is skipped with its reason. The items carry the
marker ``acc_conformance``, so ``pytest --acc-lib=libx.so -m acc_conformance``
runs the kit alone.

Options: ``--acc-lib PATH`` (repeatable), ``--acc-devices 0,1`` (default:
every device), ``--acc-no-isolate`` (run the checks in the pytest process
instead of child processes).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import pytest

from acc_host_pytest import MARKER

from . import check_library
from .report import FAIL, SKIP, CheckResult, Report

__all__ = ["pytest_collection_modifyitems", "ConformanceLibrary", "ConformanceItem"]


def _libraries(config: pytest.Config) -> list[str]:
    return list(config.getoption("acc_lib") or [])


class ConformanceFailure(Exception):
    """A failed conformance check (its detail is the report)."""


class ConformanceItem(pytest.Item):
    """One conformance check of one library."""

    def __init__(self, *, result: CheckResult, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result = result
        self.add_marker(MARKER)

    def runtest(self) -> None:
        if self.result.status == SKIP:
            pytest.skip(self.result.detail or "not applicable")
        if self.result.status == FAIL:
            raise ConformanceFailure(self.result.detail)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return f"{self.result.id} FAILED: {self.result.detail}"
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"acc-host conformance {self.result.id}"


class ConformanceLibrary(pytest.Collector):
    """The checks of one library: the kit runs when the collector collects."""

    def __init__(self, *, library: str, devices: list[int] | None, isolate: bool,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.library = library
        self.devices = devices
        self.isolate = isolate
        self.report: Report | None = None

    def collect(self) -> Iterable[pytest.Item]:
        self.report = check_library(self.library, self.devices, isolate=self.isolate)
        return [ConformanceItem.from_parent(self, name=f"check[{result.id}]", result=result)
                for result in self.report.results]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Adds the checks of every --acc-lib library to the collected items
    (tryfirst, so that -k and -m select among them too)."""
    libraries = _libraries(config)
    if not libraries:
        return
    text = config.getoption("acc_devices")
    devices = None if text is None else [int(dev) for dev in str(text).split(",") if dev.strip()]
    isolate = not config.getoption("acc_no_isolate")
    for library in libraries:
        name = f"acc-conformance[{os.path.basename(library)}]"
        collector = ConformanceLibrary.from_parent(session, name=name, nodeid=name,
                                                   library=library, devices=devices,
                                                   isolate=isolate)
        items.extend(collector.collect())
