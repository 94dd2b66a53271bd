"""``python -m livebridge``: the same command line as ``livebridge``."""

import sys

from livebridge.cli.main import main

__all__: list[str] = []

sys.exit(main())
