"""pytest11 entry point of acc-host: the conformance kit's command line
options (``pytest --acc-lib=path/libx.so``).

It imports nothing from acc_host unless ``--acc-lib`` is given: importing
acc_host loads the accelerator plugins, which an unrelated pytest run in an
environment where acc-host is installed must not pay for or depend on. With
the option, it registers :mod:`acc_host.conformance.pytest_plugin`, which
turns every check of the kit into a test item.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MARKER", "pytest_addoption", "pytest_configure"]

MARKER = "acc_conformance"


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("acc-host conformance", "conformance kit for accelerator plugins")
    group.addoption("--acc-lib", action="append", default=[], metavar="PATH",
                    help="run the acc-host conformance kit against this accelerator library "
                         "(repeatable); each check becomes a test")
    group.addoption("--acc-devices", default=None, metavar="IDS",
                    help="comma-separated device ids to check (default: all)")
    group.addoption("--acc-no-isolate", action="store_true", default=False,
                    help="run the checks in the pytest process (a crashing plugin then takes "
                         "pytest down)")


def pytest_configure(config: Any) -> None:
    if not config.getoption("acc_lib"):
        return
    from acc_host.conformance import pytest_plugin

    config.addinivalue_line("markers", f"{MARKER}: a check of the acc-host conformance kit")
    config.pluginmanager.register(pytest_plugin, "acc_host_conformance_kit")
