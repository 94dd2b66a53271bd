"""Internal: OpenAI Realtime and chat ``tool_calls``: the wire codec, the protocol (with its calls,
response and error parts), the ``openai`` connector, the function declarations and the non-
streaming adapter. The emulator's OpenAI side is ``livebridge.emulator.openai``. ``VENDOR`` is what
the rest of livebridge knows of it."""

from types import MappingProxyType

from livebridge.protocol.vendor import Vendor

VENDOR = Vendor(
    name="openai",
    title="OpenAI Realtime",
    cli="openai",
    client_class="openai.AsyncOpenAI",
    connector="livebridge.vendors.openai.connector:OpenAIConnector",
    declarations="livebridge.vendors.openai.declarations:declarations",
    default_model="gpt-realtime-2",
    sdk="openai",
    extra="openai",
    base_url_variable="OPENAI_BASE_URL",
    key_variables=("OPENAI_API_KEY",),
    emulator=MappingProxyType({"protocol": "openai"}),
    input_audio="audio/pcm;rate=24000",
    output_audio="audio/pcm;rate=24000",
    sync_clients=("openai.OpenAI", "openai.AzureOpenAI"),
    backend="openai",
    emulator_client="openai_client",
    text_config=MappingProxyType({"output_modalities": ["text"]}),
)
