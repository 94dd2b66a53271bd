"""Internal: Gemini Live and ``generate_content``: the wire codec, the protocol, the google-genai
connector, the ``toolResponse`` encoder, the tool declarations and the non-streaming adapter. The
emulator's Gemini side is ``livebridge.emulator.gemini``. ``VENDOR`` is what the rest of livebridge
knows of it."""

from types import MappingProxyType

from livebridge.protocol.vendor import Vendor

VENDOR = Vendor(
    name="gemini",
    title="Gemini Live",
    cli="gemini",
    client_class="google.genai.Client",
    connector="livebridge.vendors.gemini.connector:GeminiConnector",
    declarations="livebridge.vendors.gemini.declarations:declarations",
    default_model="gemini-3.8-live",
    sdk="google.genai",
    extra=None,
    base_url_variable="GOOGLE_GEMINI_BASE_URL",
    key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    emulator=MappingProxyType({"protocol": "gemini"}),
    input_audio="audio/pcm;rate=16000",
    output_audio="audio/pcm;rate=24000",
    recording="livebridge.vendors.gemini.recording:GeminiWire",
    replay_model="gemini-live-replay",
    replay_config=MappingProxyType({"response_modalities": ["AUDIO"]}),
    text_config=MappingProxyType(
        {"response_modalities": ["AUDIO"], "output_audio_transcription": {}}
    ),
)
