"""``python -m acc_host`` runs the demo."""

import sys

from .demo import main

sys.exit(main())
