"""``python -m acc_host``: the ``acc-host`` command (acc_host.cli). The demo
is ``python -m acc_host.demo`` (or ``acc-host demo``)."""

import sys

from .cli import main

sys.exit(main())
