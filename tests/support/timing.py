"""One unit for every time bound a test asserts or waits within, scaled by the environment.

A bound in raw seconds holds on the machine it was written on; a slower or busier one (a CI
runner, a laptop on battery) needs more. ``LIVEBRIDGE_TEST_TIME_UNIT=3`` makes every bound three
times as long without touching a test. Only upper bounds scale: a lower bound (a delay that must
have passed) and a configured delay (what the code under test is told to wait) stay as written.
"""

from __future__ import annotations

import os

__all__ = ["UNIT", "seconds"]

#: How much longer than written every bound is (1 unless the environment says otherwise).
UNIT = float(os.environ.get("LIVEBRIDGE_TEST_TIME_UNIT", "1"))


def seconds(bound: float) -> float:
    """``bound`` seconds on this machine: ``bound * UNIT``."""
    return bound * UNIT
