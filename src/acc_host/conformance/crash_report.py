"""What an isolated check's crash printed, and the sanitizer runtimes a
sanitized library needs.

A plugin that dies in the kit's child process usually prints a report
first: AddressSanitizer's ``==PID==ERROR: AddressSanitizer:
heap-buffer-overflow ...`` with the access (``WRITE of size 16 ...``) and
the stack frames, UndefinedBehaviorSanitizer's ``file.c:12:5: runtime
error: ...``, glibc's ``free(): double free detected``, or Python's
``Fatal Python error: Segmentation fault``. The first report is the one
that names the bug (later ones are its consequences, and the interpreter's
shutdown noise comes last), so :func:`crash_summary` returns it with its
first stack, and falls back to the output's last characters when there is
no report.

A library built with ``-fsanitize=address`` or ``undefined`` (for example
``python build_plugins.py --sanitize``) links the sanitizer runtimes, which
must be loaded before anything else in the process: :func:`sanitizer_environment`
finds them with ``ldd`` and returns the LD_PRELOAD (and the sanitizer
options) the child needs, so that ``acc-host check`` runs such a library as
it is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["crash_summary", "first_report", "sanitizer_environment", "sanitizer_runtimes",
           "is_sanitized"]

# The first line of a report, by who prints it.
_REPORT_START = re.compile(
    r"ERROR: (AddressSanitizer|LeakSanitizer|MemorySanitizer)"
    r"|WARNING: ThreadSanitizer"
    r"|: runtime error: "
    r"|\*\*\* (stack smashing|buffer overflow) detected \*\*\*"
    r"|^(free|malloc|realloc|munmap_chunk|corrupted)[^:\n]*\(\)?: "
    r"|double free or corruption"
    r"|^Fatal Python error: ", re.MULTILINE)
_FRAME = re.compile(r"^\s*#\d+\s")
_PYTHON_FRAME = re.compile(r'^\s*File "')
_ADDRESS_IN = re.compile(r"\b0x[0-9a-f]+ in ")
_MAX_FRAMES = 12
_HOST_FRAMES = ("_cffi_backend", "ffi_call", "libffi")
_FALLBACK_CHARS = 300


def first_report(text: str, max_frames: int = _MAX_FRAMES) -> str | None:
    """The first sanitizer, allocator or interpreter crash report in text:
    its first line, the lines up to its first stack, and up to max_frames of
    that stack's frames (program counters dropped: ``#0 in infer
    file.c:893``), with the line after the stack that says where the address
    lies (``... is located 0 bytes after 96-byte region``); None when text
    holds no report."""
    match = _REPORT_START.search(text)
    if match is None:
        return None
    line_start = text.rfind("\n", 0, match.start()) + 1
    lines = text[line_start:].splitlines()
    kept = [lines[0].strip()]
    frames = host_frames = 0
    in_stack = host_reached = False
    more: list[str] = []
    for line in lines[1:]:
        frame = bool(_FRAME.match(line) or _PYTHON_FRAME.match(line))
        if frame:
            in_stack = True
            if host_reached or any(marker in line for marker in _HOST_FRAMES):
                # The cffi call that entered the plugin, and the interpreter
                # below it: the host's frames, the same for every crash.
                host_reached = True
                host_frames += 1
                continue
            frames += 1
            if frames <= max_frames:
                kept.append("  " + _ADDRESS_IN.sub("in ", line.strip()))
            continue
        if in_stack:
            following = line.strip()
            if not following:
                continue
            if "is located" in following or "freed by thread" in following:
                kept.append(following)
            break
        if line.strip() and len(kept) < 6:
            kept.append(line.strip())
    if frames > max_frames:
        more.append(f"{frames - max_frames} more frames")
    if host_frames:
        more.append(f"{host_frames} frames of the host (cffi, Python)")
    if more:
        at = next((index for index, text in enumerate(kept)
                   if index and not text.startswith("  #")
                   and kept[index - 1].startswith("  #")), len(kept))
        kept.insert(at, "  ... " + ", ".join(more))
    return "\n".join(kept)


def crash_summary(text: str) -> str:
    """The first crash report in a child's output (see first_report), else
    its last few hundred characters on one line."""
    report = first_report(text)
    if report is not None:
        return "\n" + report
    return " ".join(text.split())[-_FALLBACK_CHARS:]


def _needed_runtimes(library: str) -> list[str]:
    """The sanitizer runtimes (libasan, libubsan, ...) library's file names
    as needed libraries (a byte search of the file: no loader involved)."""
    try:
        with open(library, "rb") as handle:
            data = handle.read(64 << 20)
    except OSError:
        return []
    return [name for name in ("libasan", "libubsan", "libtsan")
            if re.search(rb"\x00" + name.encode() + rb"\.so[.0-9]*\x00", data)]


def is_sanitized(library: str) -> bool:
    """Whether library was built with a sanitizer (needs its runtime)."""
    return bool(_needed_runtimes(library))


def sanitizer_runtimes(library: str) -> list[str]:
    """The paths of the sanitizer runtimes library needs, as ``ldd`` finds
    them ([] when it needs none, or ldd is missing)."""
    needed = _needed_runtimes(library)
    ldd = shutil.which("ldd")
    if not needed or ldd is None:
        return []
    try:
        # Without LD_PRELOAD: ldd would list the preloaded runtimes instead.
        env = {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
        listing = subprocess.run([ldd, library], capture_output=True, text=True, timeout=30,
                                 check=False, env=env).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for name in needed:
        match = re.search(rf"^\s*{name}\.so[.0-9]*\s*=>\s*(\S+)", listing, re.MULTILINE)
        if match and Path(match.group(1)).is_file():
            found.append(match.group(1))
    return found


def sanitizer_environment(library: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables to set for a child that loads library: LD_PRELOAD with
    the sanitizer runtimes it needs first (unless env preloads them
    already), leak detection off (the interpreter's own allocations are not
    the plugin's leaks) and UBSan halting with a stack. {} for a library
    built without sanitizers."""
    preload = env.get("LD_PRELOAD", "")
    runtimes = [path for path in sanitizer_runtimes(library)
                if os.path.basename(path).split(".so")[0] not in preload]
    if not runtimes and not _needed_runtimes(library):
        return {}
    changes: dict[str, str] = {}
    if runtimes:
        changes["LD_PRELOAD"] = ":".join([*runtimes, *filter(None, preload.split(":"))])
    if "ASAN_OPTIONS" not in env:
        changes["ASAN_OPTIONS"] = "detect_leaks=0"
    if "UBSAN_OPTIONS" not in env:
        changes["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    return changes
