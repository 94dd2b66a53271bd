"""Hypothesis profiles: ``dev`` (few examples, quick) for local runs, ``ci`` (thorough) for CI.

``ci`` is loaded when ``CI`` is set and by ``make test``; ``--hypothesis-profile`` picks either.
A test that needs more (or fewer) examples than the profile's default asks for
``examples(n)``: ``n`` under ``ci``, the same share of ``n`` under ``dev``.
"""

from __future__ import annotations

import os

from hypothesis import settings

__all__ = ["CI_EXAMPLES", "examples", "load"]

#: Examples per test under ``ci`` (Hypothesis's own default) and under ``dev``.
CI_EXAMPLES = 100
DEV_EXAMPLES = 10

settings.register_profile("ci", max_examples=CI_EXAMPLES, print_blob=True)
settings.register_profile("dev", max_examples=DEV_EXAMPLES)


def load() -> None:
    """Load ``ci`` when the environment says CI, else ``dev`` (the command line may override)."""
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


def examples(thorough: int) -> int:
    """Examples for a test that runs ``thorough`` of them under ``ci``, scaled to the profile."""
    loaded = settings.default
    per_test = CI_EXAMPLES if loaded is None else loaded.max_examples
    return max(1, thorough * per_test // CI_EXAMPLES)
