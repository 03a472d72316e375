"""Fuzz target: the symbol JSON loader (mx.sym.load_json, and mx.sym.load
for bytes that are not UTF-8).

Allowed outcomes: a Symbol (whose arguments, outputs and auxiliary states
can be listed, whose shapes can be inferred as far as its hints go, and
whose JSON loads back to the same JSON), or an acc_host.errors.AccHostError
(GraphError for a malformed file, OperatorError and its subclasses for
unknown operators and bad attributes). Everything else is a bug
(harness.py). Seeds: fuzz/corpus/symbol_json/.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

with harness.instrumented():
    import acc_host as mx
    from acc_host.errors import AccHostError

_FILE = Path(tempfile.gettempdir()) / f"acc_fuzz_symbol_{os.getpid()}-symbol.json"


def check(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Not text: what reading such a file says.
        _FILE.write_bytes(data)
        try:
            mx.sym.load(_FILE)
        except AccHostError:
            return
        finally:
            _FILE.unlink()
        raise AssertionError("a file that is not UTF-8 loaded") from None
    try:
        symbol = mx.sym.load_json(text)
    except AccHostError:
        return
    symbol.list_arguments()
    symbol.list_outputs()
    symbol.list_auxiliary_states()
    try:
        symbol.infer_shape_partial()
    except AccHostError:
        pass
    except Exception as error:
        if not harness.known_open(error):
            raise
    saved = symbol.tojson()
    assert mx.sym.load_json(saved).tojson() == saved


if __name__ == "__main__":
    sys.exit(harness.main(check))
