"""`python -m rackbench`: the rackbench command."""

import sys

from rackbench.cli import main

sys.exit(main())
