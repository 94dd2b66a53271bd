"""Internal: OpenAI GPT-Live (``v1/live/sessions``): a voice model that delegates tool calls to a
Responses backend, spoken to through the ``openai`` SDK's ``client.live.connect()``. The emulator's
GPT-Live side is ``livebridge.emulator.openai_live``. ``VENDOR`` is what the rest of livebridge
knows of it: an ``openai.AsyncOpenAI`` with a ``gpt-live`` model."""

from types import MappingProxyType

from livebridge.protocol.vendor import Vendor

VENDOR = Vendor(
    name="gpt-live",
    title="GPT-Live",
    cli="openai",
    client_class="openai.AsyncOpenAI",
    connector="livebridge.vendors.openai_live.connector:GptLiveConnector",
    declarations="livebridge.vendors.openai.declarations:declarations",
    default_model="gpt-live-1.1",
    sdk="openai",
    extra="openai",
    base_url_variable="OPENAI_BASE_URL",
    key_variables=("OPENAI_API_KEY",),
    emulator=MappingProxyType({"protocol": "openai", "model": "gpt-live-1.1"}),
    model_prefixes=("gpt-live",),
    input_audio="audio/pcm;rate=24000",
    output_audio="audio/pcm;rate=24000",
    sync_clients=("openai.OpenAI", "openai.AzureOpenAI"),
    recording="livebridge.vendors.openai_live.recording:GptLiveWire",
    replay_model="gpt-live-1.1",
    backend="openai",
    text_config=MappingProxyType({}),
    session_options=frozenset({"attach", "delegate"}),
)
