"""The commands and programs of docs/serving.md, run: each way it starts a
server (``acc-host serve``, ``acc-host serve --ray``, the Python API) is
started on free ports in place of 8080 and 8081, its client program runs
against it and prints what the page says, and SIGTERM stops it with
status 0. Marked slow (one of the servers starts a Ray cluster)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT
from support.serving import ServerProcess, free_ports

pytestmark = [pytest.mark.serve, pytest.mark.slow]

PAGE = ROOT / "docs" / "serving.md"
MARKER = "<!-- doc-test: tests/serve/test_serve_docs.py -->"


def _blocks() -> list[tuple[str, str]]:
    """(language, code) of the page's blocks this test runs, in order."""
    pattern = re.escape(MARKER) + r"\n```(\w+)\n(.*?)^```"
    return re.findall(pattern, PAGE.read_text(encoding="utf-8"), flags=re.S | re.M)


def _ported(code: str, http: int, grpc: int) -> str:
    return code.replace("8080", str(http)).replace("8081", str(grpc))


def _servers() -> dict[str, tuple[str, str]]:
    """The page's ways to start a server, by kind: cli, python_api, ray."""
    servers = {}
    for language, code in _blocks():
        if "acc-host serve" in code:
            servers["ray" if "--ray" in code else "cli"] = (language, code)
        elif "serve([" in code:
            servers["python_api"] = (language, code)
    return servers


def _client() -> str:
    (code,) = [code for language, code in _blocks()
               if language == "python" and "InferenceServerClient" in code]
    return code


def test_the_page_has_its_blocks() -> None:
    assert set(_servers()) == {"cli", "python_api", "ray"} and _client()


@pytest.mark.parametrize("kind", ["cli", "python_api", "ray"])
def test_server_and_client(kind: str, tmp_path: Path) -> None:
    language, code = _servers()[kind]
    http, grpc = free_ports(2)
    code = _ported(code, http, grpc)
    if language == "python":
        command = [sys.executable, "-c", code]
    else:
        words = shlex.split(code.replace("\\\n", " "))
        assert words[:2] == ["acc-host", "serve"]
        command = [sys.executable, "-m", "acc_host", *words[1:]]
    server = ServerProcess([], tmp_path / "server.log", command=command, ports=(http, grpc),
                           cwd=ROOT, ready_timeout=240)
    try:
        done = subprocess.run([sys.executable, "-c", _ported(_client(), http, grpc)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.splitlines()[-1] == "(2, 10)", done.stdout
        assert "'shape': [-1, 3, 32, 32]" in done.stdout
    finally:
        assert server.stop() == 0, server.output()[-3000:]
