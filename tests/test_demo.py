"""The main job runs and checks itself against the numpy reference."""

from acc_host import demo


def test_demo_passes(capsys) -> None:
    assert demo.main(repeat=3) == 0
    output = capsys.readouterr().out
    assert "supportedOps accepts 11 of 11" in output
    assert output.count(" OK") == 2 and "demo passed" in output
