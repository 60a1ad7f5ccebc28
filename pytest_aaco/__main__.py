"""``python -m pytest_aaco``: the ``aaco`` command of this interpreter's environment."""

import sys

from pytest_aaco.cli import main

sys.exit(main())
