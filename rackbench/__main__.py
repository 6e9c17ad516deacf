import sys

from rackbench.cli import main

sys.exit(main())
