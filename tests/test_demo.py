"""The main job runs and checks itself against the numpy reference."""

import acc_host as mx
from acc_host import demo


def test_demo_passes(capsys) -> None:
    assert demo.main(repeat=3) == 0
    output = capsys.readouterr().out
    assert "supportedOps accepts 11 of 11" in output
    assert "demo passed" in output and "MISMATCH" not in output
    alive = [library for library in mx.libraries() if library.alive]
    assert output.count(" OK") >= 2 + 1 + len(alive)  # small CNN x2, real model
    assert "squeezenet1_1 (MXNet 1.9.1 checkpoint" in output
