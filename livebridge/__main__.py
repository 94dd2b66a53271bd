"""``python -m livebridge``: the same command line as ``livebridge``."""

import sys

from livebridge.cli.main import main

sys.exit(main())
