"""The emulator's GPT-Live side (``v1/live/sessions``), internal: ``Emulator(model="gpt-live-1.1")``
serves it to the unmodified ``openai`` SDK; ``emu.client()`` is an ``openai.AsyncOpenAI`` that
trusts it. A scenario's side of it (``LiveServerSession``, ``LiveOptions``) is exported by
``livebridge.emulator``."""
