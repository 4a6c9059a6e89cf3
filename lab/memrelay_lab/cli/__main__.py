"""`python -m memrelay_lab.cli`."""

import sys

from ._main import main

sys.exit(main())
