"""The main job runs and checks itself against the numpy reference.

It runs in a fresh interpreter, as `python -m acc_host.demo` does: the demo
runs the real model on every accelerator loaded, and plugins that other
tests load (deliberately misbehaving fakes among them) stay registered for
the rest of the session."""

import subprocess
import sys

from support.paths import ROOT


def test_demo_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from acc_host import demo; sys.exit(demo.main(3))"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    output = done.stdout
    assert done.returncode == 0, output + done.stderr[-3000:]
    assert "supportedOps accepts 11 of 11" in output
    assert "demo passed" in output and "MISMATCH" not in output
    assert "squeezenet1_1 (MXNet 1.9.1 checkpoint" in output
    real = output[output.index("squeezenet1_1 (MXNet"):].splitlines()[1:]
    contexts = [line.split()[0] for line in real if " ms " in line]
    assert contexts[:1] == ["cpu(0)"] and {"cpu_ref(0)", "mlu(0)"} <= set(contexts)
    assert all(" OK " in line for line in real if " ms " in line)
