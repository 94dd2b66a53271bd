"""A LiveSession inside an app: declare tools, ask one question, print the answer and the calls.

python examples/embedded.py                          # against the local emulator, no key
GEMINI_API_KEY=... python examples/embedded.py       # against the Gemini Live API
"""

import os
import sys

import anyio
from google import genai
from google.genai import types

import livebridge
from livebridge import OutputTranscript, TextOut, ToolCallSettled, TurnComplete
from livebridge.emulator import Emulator

MODEL = "gemini-3.8-live"
CONFIG = types.LiveConnectConfig(
    response_modalities=[types.Modality.AUDIO],
    output_audio_transcription=types.AudioTranscriptionConfig(),
)
tools = livebridge.ToolRegistry()


@tools.tool(timeout=5.0)
async def get_weather(city: str) -> dict[str, str]:
    """Current weather for a city."""
    return {"city": city, "sky": "sunny", "high_c": "21"}


async def ask(client: genai.Client, question: str) -> None:
    async with livebridge.LiveSession.connect(
        client, model=MODEL, tools=tools, config=CONFIG
    ) as session:
        await session.send_text(question)
        while (event := await session.next_event()) and not isinstance(event, TurnComplete):
            if isinstance(event, ToolCallSettled):
                print(f"[{event.name}: {event.ending} in {event.latency * 1000:.0f} ms]")
            elif isinstance(event, OutputTranscript | TextOut):
                print(event.text, end="", flush=True)
        print()


async def main() -> None:
    key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
    if key and "--emulator" not in sys.argv:
        await ask(genai.Client(api_key=key), "What's the weather in Paris and Tokyo?")
    else:
        async with Emulator() as emulator:
            await ask(emulator.client(), "What's the weather in Paris and Tokyo?")


if __name__ == "__main__":
    anyio.run(main)
