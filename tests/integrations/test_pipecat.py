"""livebridge's tools on a Pipecat LLM service, in Pipecat's own pinned environment.

Pipecat is not in the main test environment: ``tests/integrations/venv.py`` builds its
environment once (cached outside the repository) and the checks in ``check_pipecat.py`` run
there, with this checkout first on the path.
"""

from __future__ import annotations

import importlib.util

import pytest

from livebridge import ToolRegistry, UsageError
from livebridge.integrations.pipecat import tools_schema
from tests.integrations.framework import run_checks


@pytest.mark.timeout(900)  # the first run builds the environment (about 2 min)
def test_pipecat_runs_livebridge_tools() -> None:
    # Pipecat 1.14 imports audioop, which Python 3.11 marks deprecated.
    quiet = ("-W", "ignore:'audioop' is deprecated:DeprecationWarning")
    run_checks("pipecat", "tests/integrations/check_pipecat.py", *quiet)


def test_without_pipecat_the_error_names_the_extra() -> None:
    if importlib.util.find_spec("pipecat") is not None:
        pytest.skip("Pipecat is installed here")
    with pytest.raises(UsageError, match=r"livebridge-voice\[pipecat\]"):
        tools_schema(ToolRegistry())
