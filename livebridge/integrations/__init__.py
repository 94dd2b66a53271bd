"""livebridge's tool contract inside agent frameworks that own the model's connection.

Each module adapts one framework's tool seam to ``Dispatcher.submit`` and imports that
framework only when it is imported itself (an optional extra of livebridge-voice). The modules
are public: ``livebridge.integrations.openai_agents``, ``.pipecat`` and ``.livekit``.
"""
