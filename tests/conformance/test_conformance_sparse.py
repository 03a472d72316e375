"""The conformance kit's sparse checks (conformance/checks_sparse.py): cpu_ref,
which takes sparse tensors, passes them; mlu_sim, which exports no
supportsSparse(), passes sparse.claim and gets no other; a cpu_ref build that trusts its caller's
indices fails sparse.malformed."""

from __future__ import annotations

import pytest

from acc_host.cli import main

SPARSE_CHECKS = ["sparse.claim", "sparse.numerics.dot_csr", "sparse.numerics.fully_connected_csr",
                 "sparse.numerics.embedding_row_sparse", "sparse.numerics.take_row_sparse",
                 "sparse.malformed"]


def _lines(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, str]]:
    status = main(["check", *args, "--only", "sparse*"])
    lines = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith(("PASS", "FAIL", "SKIP")):
            verdict, check_id, *_ = line.split(None, 2)
            lines[check_id] = verdict
    return status, lines


def test_cpu_ref_passes_the_sparse_checks(capsys) -> None:
    status, lines = _lines(capsys, "cpu_ref", "--no-isolate")
    assert status == 0 and lines == {check: "PASS" for check in SPARSE_CHECKS}


def test_a_plugin_without_sparse_skips_them(capsys) -> None:
    status, lines = _lines(capsys, "mlu", "--no-isolate")
    assert status == 0 and lines == {"sparse.claim": "PASS"}


@pytest.mark.slow  # builds a cpu_ref variant (about 30 s on 2 cores)
def test_a_plugin_trusting_its_caller_fails_malformed(capsys, build_cpu_ref_variant) -> None:
    library = build_cpu_ref_variant("trusting", CR_NAME='"cpu_ref_trusting"',
                                    CR_SPARSE_TRUST_CALLER=1)
    status, lines = _lines(capsys, str(library))  # isolated: reading past arrays may crash
    assert status == 1 and lines["sparse.malformed"] == "FAIL"
    assert all(lines[check] == "PASS" for check in SPARSE_CHECKS[:-1])
