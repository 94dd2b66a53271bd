"""Internal: OpenAI GPT-Live (``v1/live/sessions``): a voice model that delegates tool calls to a
Responses backend, spoken to through the ``openai`` SDK's ``client.live.connect()``."""
