"""acc_host.conformance.crash_report: the first report of a crashed check,
the sanitizer runtimes of a sanitized library; and check selection."""

from __future__ import annotations

from acc_host.conformance.crash_report import crash_summary, first_report, sanitizer_environment
from acc_host.conformance.runner import selector

ASAN = """\
some output of the plugin
=================================================================
==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602 at pc 0x7f bp 0x7ffd sp 0x7ff
WRITE of size 16 at 0x602000000020 thread T0
    #0 0x7f1 in __interceptor_memset sanitizer_common_interceptors.inc:799
    #1 0x7f2 in write_output /src/file.c:566
    #2 0x7f3 in infer /src/file.c:893
    #3 0x7f4 in ffi_call_unix64 (/venv/_cffi_backend.cpython-311-x86_64-linux-gnu.so+0x29051)
    #4 0x7f5 in cdata_call (/venv/_cffi_backend.cpython-311-x86_64-linux-gnu.so+0x12905)
    #5 0x7f6 in _PyObject_Call Objects/call.c:343

0x602000000020 is located 0 bytes to the right of 96-byte region [0x6020,0x6080)
allocated by thread T0 here:
    #0 0x7f7 in malloc
==4242==ABORTING
==4243==ERROR: AddressSanitizer: SEGV on unknown address (a consequence)
"""


def test_the_first_asan_report_with_the_plugins_frames() -> None:
    lines = first_report(ASAN).splitlines()
    assert lines[0].startswith("==4242==ERROR: AddressSanitizer: heap-buffer-overflow")
    assert lines[1] == "WRITE of size 16 at 0x602000000020 thread T0"
    assert lines[2:5] == ["  #0 in __interceptor_memset sanitizer_common_interceptors.inc:799",
                          "  #1 in write_output /src/file.c:566", "  #2 in infer /src/file.c:893"]
    assert lines[5] == "  ... 3 frames of the host (cffi, Python)"
    assert lines[6].startswith("0x602000000020 is located 0 bytes to the right")
    assert len(lines) == 7 and "SEGV" not in "\n".join(lines)


def test_long_stacks_are_cut() -> None:
    frames = "\n".join(f"    #{index} 0x1 in f{index} a.c:{index}" for index in range(30))
    report = first_report(f"==1==ERROR: AddressSanitizer: stack-overflow\n{frames}\n",
                          max_frames=4)
    assert report.splitlines()[1:] == [*(f"  #{i} in f{i} a.c:{i}" for i in range(4)),
                                       "  ... 26 more frames"]


def test_ubsan_glibc_and_python_reports() -> None:
    ubsan = ("noise\nplugin.c:12:5: runtime error: signed integer overflow: 2147483647 + 1\n"
             "    #0 0x1 in add plugin.c:12\n    #1 0x2 in infer plugin.c:40\n")
    assert first_report(ubsan).splitlines() == [
        "plugin.c:12:5: runtime error: signed integer overflow: 2147483647 + 1",
        "  #0 in add plugin.c:12", "  #1 in infer plugin.c:40"]
    assert first_report("free(): double free detected in tcache 2\n") == \
        "free(): double free detected in tcache 2"
    python = ('Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call '
              'first):\n  File "/x/loaded_model.py", line 3 in infer\n  File "/x/y.py", line 9 '
              'in run\n\nExtension modules: numpy\n')
    lines = first_report(python).splitlines()
    assert lines[0] == "Fatal Python error: Segmentation fault"
    assert lines[-1].startswith('  File "/x/y.py"')


def test_without_a_report_the_tail_on_one_line() -> None:
    assert first_report("just\nsome output\n") is None
    text = "x" * 1000 + "\nthe end\n"
    summary = crash_summary(text)
    assert "\n" not in summary and summary.endswith("the end") and len(summary) == 300
    assert crash_summary(ASAN).startswith("\n==4242==ERROR")


def test_a_plain_library_needs_no_sanitizer_environment(tmp_path) -> None:
    library = tmp_path / "libplain.so"
    library.write_bytes(b"\x7fELF\x00libc.so.6\x00libm.so.6\x00")
    assert sanitizer_environment(str(library), {}) == {}
    assert sanitizer_environment(str(tmp_path / "missing.so"), {}) == {}


def test_selector_patterns() -> None:
    everything = selector(None)
    assert everything("abi.load") and selector([])("x.y")
    chosen = selector(["symbolic.numerics.*", "threads"])
    assert chosen("symbolic.numerics.Convolution.float32")
    assert chosen("threads.concurrent") and chosen("threads.repeated")
    assert not chosen("symbolic.graphs") and not chosen("threadsx.y")
    assert selector(["abi.load"])("abi.load") and not selector(["abi.load"])("abi.loader")
