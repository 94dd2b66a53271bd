"""livebridge's tools in LiveKit Agents, in LiveKit's own pinned environment.

LiveKit Agents is not in the main test environment: ``tests/integrations/venv.py`` builds its
environment once (cached outside the repository) and the checks in ``check_livekit.py`` run
there, with this checkout first on the path.
"""

from __future__ import annotations

import importlib.util

import pytest

from livebridge import ToolRegistry, UsageError
from livebridge.integrations.livekit import function_tools
from tests.integrations.framework import run_checks


@pytest.mark.timeout(900)  # the first run builds the environment (about 1.5 min)
def test_livekit_agents_runs_livebridge_tools() -> None:
    run_checks("livekit", "tests/integrations/check_livekit.py")


def test_without_livekit_the_error_names_the_extra() -> None:
    if importlib.util.find_spec("livekit") is not None:
        pytest.skip("LiveKit Agents is installed here")
    with pytest.raises(UsageError, match=r"livebridge-voice\[livekit\]"):
        function_tools(ToolRegistry())
