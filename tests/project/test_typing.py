"""The package type-checks clean under mypy (settings: pyproject.toml's
[tool.mypy]), so that its annotations stay true as it changes."""

import subprocess
import sys

import pytest
from support.paths import ROOT


@pytest.mark.slow
def test_mypy_reports_no_errors() -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "mypy", "src/acc_host"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
