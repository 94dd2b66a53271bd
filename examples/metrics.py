"""Prometheus metrics next to a Live session: serve the scrape endpoint, talk, scrape it.

    python examples/metrics.py                           # against the local emulator, no key
    GEMINI_API_KEY=... python examples/metrics.py        # against the Gemini Live API

Point Prometheus at the printed URL to keep the numbers (the endpoint binds 127.0.0.1).
"""

import os
import sys
import urllib.request

import anyio
from google import genai
from google.genai import types
from prometheus_client import CollectorRegistry

import livebridge
from livebridge import TurnComplete
from livebridge.emulator import Emulator
from livebridge.observe import PrometheusObserver, serve

MODEL = "gemini-3.8-live"
CONFIG = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
SHOWN = (
    "livebridge_tool_calls_total",
    "livebridge_tool_turnaround_seconds_count",
    "livebridge_sessions_active",
)
tools = livebridge.ToolRegistry()


@tools.tool(timeout=5.0)
async def get_weather(city: str) -> dict[str, str]:
    """Current weather for a city."""
    await anyio.sleep(0.05)
    return {"city": city, "sky": "sunny"}


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


async def talk_and_scrape(client: genai.Client) -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry, functions=tools.names())
    with serve(port=0, registry=registry) as endpoint:
        print(f"scrape endpoint: {endpoint.url}")
        async with livebridge.LiveSession.connect(
            client, model=MODEL, tools=tools, config=CONFIG, observers=[observer]
        ) as session:
            await session.send_text("What's the weather in Paris, Tokyo and Rome?")
            while (event := await session.next_event()) and not isinstance(event, TurnComplete):
                pass
            text = await anyio.to_thread.run_sync(scrape, endpoint.url)
    for line in text.splitlines():
        if line.startswith(SHOWN):
            print(line)


async def main() -> None:
    key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
    if key and "--emulator" not in sys.argv:
        await talk_and_scrape(genai.Client(api_key=key))
    else:
        async with Emulator() as emulator:
            await talk_and_scrape(emulator.client())


if __name__ == "__main__":
    anyio.run(main)
