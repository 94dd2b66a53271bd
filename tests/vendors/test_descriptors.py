"""Each vendor is one descriptor: what it names resolves, the session and the commands pick
by it, and reading it loads no SDK."""

from __future__ import annotations

import subprocess
import sys

import openai
import pytest
from google import genai

import livebridge
from livebridge.live.vendors import VENDORS, by_cli, by_model, connector_for, vendor_for
from livebridge.protocol.vendor import Vendor, load
from livebridge.recording.read import VENDORS as RECORDED
from livebridge.vendors import DESCRIPTORS
from livebridge.vendors.openai_live.connector import GptLiveConnector
from tests.test_readme import block

FAKE_KEY = "sk-test"


def test_the_docs_example_runs() -> None:
    exec(compile(block("Adding a vendor", "docs/vendors.md"), "vendors.md", "exec"), {})


@pytest.mark.parametrize("vendor", DESCRIPTORS, ids=[v.name for v in DESCRIPTORS])
def test_every_path_a_descriptor_names_resolves(vendor: Vendor) -> None:
    assert VENDORS[vendor.name] is vendor
    assert vendor.connector_class().__name__ == vendor.connector.rpartition(":")[2]
    assert callable(load(vendor.declarations))
    if vendor.recording is not None:
        assert load(vendor.recording)().name == vendor.name  # the header names the descriptor
    assert (vendor.recording is not None) == (vendor.name in RECORDED)


def test_the_client_and_the_model_pick_the_vendor() -> None:
    client = openai.AsyncOpenAI(api_key=FAKE_KEY)
    assert vendor_for(client, "gpt-realtime-2") is VENDORS["openai"]
    assert vendor_for(client, "gpt-live-1.1") is VENDORS["gpt-live"]
    assert vendor_for(client, "models/gpt-live-1") is VENDORS["gpt-live"]
    assert vendor_for(genai.Client(api_key=FAKE_KEY), "gpt-live-1.1") is VENDORS["gemini"]
    assert vendor_for(object()) is None
    registry = livebridge.ToolRegistry()
    live = connector_for(client, model="gpt-live-1.1", tools=registry)
    assert isinstance(live, GptLiveConnector)
    assert by_model("gpt-live-1.1") is VENDORS["gpt-live"] and by_model("gpt-realtime") is None
    with pytest.raises(livebridge.UsageError, match="unknown vendor 'anthropic'"):
        by_cli("anthropic")


def test_each_vendor_declares_the_registry_in_its_own_shape() -> None:
    registry = livebridge.ToolRegistry()

    @registry.tool
    async def get_weather(city: str) -> dict[str, str]:
        """The weather in a city."""
        return {"city": city}

    (gemini,) = VENDORS["gemini"].declare(registry)
    assert gemini.name == "get_weather" and gemini.behavior is not None
    assert registry.declarations() == [gemini]  # the registry's own method: Gemini's shape
    (function,) = VENDORS["gpt-live"].declare(registry)
    assert function == VENDORS["openai"].declare(registry)[0]
    assert function["type"] == "function" and function["name"] == "get_weather"


def test_reading_the_descriptors_loads_no_sdk() -> None:
    code = (
        "import sys\n"
        "from livebridge.live.vendors import VENDORS, by_cli\n"
        "by_cli('openai', 'gpt-live-1.1')\n"
        "import livebridge.calls.tools\n"
        "loaded = [m for m in sys.modules if m.startswith(('google.genai', 'openai'))]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
