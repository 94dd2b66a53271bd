"""livebridge's function tools in the OpenAI Agents SDK, in the SDK's own pinned environment.

The SDK is not in the main test environment: ``tests/integrations/venv.py`` builds its
environment once (cached outside the repository) and the checks in ``check_openai_agents.py``
run there, with this checkout first on the path.
"""

from __future__ import annotations

import importlib.util

import pytest

from livebridge import ToolRegistry, UsageError
from livebridge.integrations.openai_agents import function_tools
from tests.integrations.framework import run_checks


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first run builds the environment (about 2 min)
def test_openai_agents_sdk_runs_livebridge_tools() -> None:
    run_checks("openai-agents", "tests/integrations/check_openai_agents.py")


def test_without_the_sdk_the_error_names_the_extra() -> None:
    if importlib.util.find_spec("agents") is not None:
        pytest.skip("the Agents SDK is installed here")
    with pytest.raises(UsageError, match=r"livebridge-voice\[openai-agents\]"):
        function_tools(ToolRegistry())
