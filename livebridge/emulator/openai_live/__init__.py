"""The emulator's GPT-Live side (``v1/live/sessions``): ``Emulator(model="gpt-live-1.1")``
serves it to the unmodified ``openai`` SDK; ``emu.client()`` is an ``openai.AsyncOpenAI``
that trusts it."""

from livebridge.emulator.openai_live.session import LiveOptions, LiveServerSession

__all__ = ["LiveOptions", "LiveServerSession"]
