"""``python -m livebridge``: the same command line as ``livebridge``."""

import sys

from livebridge.cli import main

sys.exit(main())
