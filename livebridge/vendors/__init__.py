"""Internal: Everything one vendor's API says, one folder each: wire codec, sans-I/O protocol,
connector, answer encoder, declarations, recording codec and non-streaming adapter. Each folder
exports its descriptor (``VENDOR``, a ``livebridge.protocol.vendor.Vendor``); ``DESCRIPTORS`` lists
them, and adding a vendor is a new folder plus one line there. No SDK loads until a connector, a
codec or a declaration is used."""

from livebridge.protocol.vendor import Vendor
from livebridge.vendors.gemini import VENDOR as GEMINI
from livebridge.vendors.openai import VENDOR as OPENAI
from livebridge.vendors.openai_live import VENDOR as GPT_LIVE

#: Every vendor's descriptor; ``livebridge.live.vendors.VENDORS`` holds them by name.
DESCRIPTORS: tuple[Vendor, ...] = (GEMINI, OPENAI, GPT_LIVE)
