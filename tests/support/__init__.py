"""What the test modules share: paths, builders, models and case tables.

Test modules import from here (``from support.paths import MODELS``), never
from one another (tests/project/test_test_layout.py checks). tests/ is on
sys.path because tests/conftest.py is a rootdir conftest without an
``__init__.py`` (pytest's default "prepend" import mode puts its folder
first), and conftest.py puts it there itself too, for the scripts that
tests start in child processes with PYTHONPATH naming it.
"""
